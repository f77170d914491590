// cumulus: element types and the half-precision conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace cumulus {

enum class DType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt32,
  kInt64,
  kUInt32,
  kUInt64
};
inline constexpr int kNumDTypes = 8;
inline constexpr DType kAllDTypes[kNumDTypes] = {DType::kFloat32,  DType::kFloat64, DType::kFloat16,
                                                 DType::kBFloat16, DType::kInt32,   DType::kInt64,
                                                 DType::kUInt32,   DType::kUInt64};

// IEEE 754 binary16 and bfloat16, stored as their bit patterns.
struct Float16 {
  uint16_t bits;
  friend constexpr bool operator==(Float16, Float16) = default;
};
struct BFloat16 {
  uint16_t bits;
  friend constexpr bool operator==(BFloat16, BFloat16) = default;
};

// Exact widening.
float to_float(Float16 h) noexcept;
float to_float(BFloat16 h) noexcept;
// Narrowing rounds to nearest, ties to even, overflows to infinity and keeps NaN a NaN.
// Rounding straight from double avoids the double rounding of double -> float -> half.
Float16 to_float16(double v) noexcept;
BFloat16 to_bfloat16(double v) noexcept;

// Any element type from and to double: the half types through the conversions above,
// the others as static_cast converts.
template <class T>
T from_double(double v) noexcept {
  if constexpr (std::is_same_v<T, Float16>) {
    return to_float16(v);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return to_bfloat16(v);
  } else {
    return static_cast<T>(v);
  }
}
template <class T>
double to_double(T v) noexcept {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return to_float(v);
  } else {
    return static_cast<double>(v);
  }
}

// Lower-case NumPy-style names: "float32", "bfloat16", "uint64".
std::string_view dtype_name(DType t) noexcept;
std::optional<DType> dtype_from_name(std::string_view name) noexcept;
std::size_t dtype_size(DType t) noexcept;
constexpr bool is_floating(DType t) noexcept {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<Float16> {
  static constexpr DType value = DType::kFloat16;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::kBFloat16;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<uint32_t> {
  static constexpr DType value = DType::kUInt32;
};
template <>
struct DTypeOf<uint64_t> {
  static constexpr DType value = DType::kUInt64;
};
template <class T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

// Calls f(T{}) with the C++ type of t.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32:
      return f(float{});
    case DType::kFloat64:
      return f(double{});
    case DType::kFloat16:
      return f(Float16{});
    case DType::kBFloat16:
      return f(BFloat16{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kUInt32:
      return f(uint32_t{});
    case DType::kUInt64:
      break;
  }
  return f(uint64_t{});
}

}  // namespace cumulus
