// cumulus: element types and the half-precision conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

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

// The C++ type of each DType, in the enum's order.
using DTypeTypes =
    std::tuple<float, double, Float16, BFloat16, int32_t, int64_t, uint32_t, uint64_t>;
static_assert(std::tuple_size_v<DTypeTypes> == kNumDTypes);
template <DType t>
using CppType = std::tuple_element_t<static_cast<std::size_t>(t), DTypeTypes>;

// What the world outside C++ calls each element type. The ONNX ids belong to the front end
// (cumulus/onnx.h); everything else reads this one table.
struct DTypeInfo {
  std::string_view name;      // NumPy's name: "float32", "bfloat16", "uint64"
  std::size_t size;           // bytes
  char numpy_char;            // numpy.dtype(name).char; 0 where NumPy has no such type
  std::string_view npy_code;  // .npy descr (and __array_interface__ typestr) without the byte
                              // order: "f4"; empty where .npy has no form (bfloat16)
  uint8_t dlpack_code;        // DLDataTypeCode: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4
  uint8_t dlpack_bits;
};
inline constexpr DTypeInfo kDTypeInfo[kNumDTypes] = {
    {"float32", 4, 'f', "f4", 2, 32}, {"float64", 8, 'd', "f8", 2, 64},
    {"float16", 2, 'e', "f2", 2, 16}, {"bfloat16", 2, 0, "", 4, 16},
    {"int32", 4, 'i', "i4", 0, 32},   {"int64", 8, 'l', "i8", 0, 64},
    {"uint32", 4, 'I', "u4", 1, 32},  {"uint64", 8, 'L', "u8", 1, 64},
};
constexpr const DTypeInfo& dtype_info(DType t) noexcept { return kDTypeInfo[static_cast<int>(t)]; }

namespace detail {
template <std::size_t... I>
constexpr bool sizes_match(std::index_sequence<I...>) {
  return ((kDTypeInfo[I].size == sizeof(std::tuple_element_t<I, DTypeTypes>) &&
           kDTypeInfo[I].dlpack_bits == 8 * sizeof(std::tuple_element_t<I, DTypeTypes>)) &&
          ...);
}
static_assert(sizes_match(std::make_index_sequence<kNumDTypes>{}));
}  // namespace detail

constexpr std::string_view dtype_name(DType t) noexcept { return dtype_info(t).name; }
constexpr std::size_t dtype_size(DType t) noexcept { return dtype_info(t).size; }
std::optional<DType> dtype_from_name(std::string_view name) noexcept;
constexpr bool is_floating(DType t) noexcept { return dtype_info(t).dlpack_code >= 2; }

namespace detail {
template <class T, std::size_t I = 0>
constexpr DType dtype_index() {
  static_assert(I < kNumDTypes, "not a cumulus element type");
  if constexpr (std::is_same_v<T, std::tuple_element_t<I, DTypeTypes>>) {
    return static_cast<DType>(I);
  } else {
    return dtype_index<T, I + 1>();
  }
}
}  // namespace detail
template <class T>
inline constexpr DType dtype_of = detail::dtype_index<T>();

// Calls f(T{}) with the C++ type of t.
template <class F, std::size_t I = 0>
decltype(auto) visit_dtype(DType t, F&& f) {
  using T = std::tuple_element_t<I, DTypeTypes>;
  if constexpr (I + 1 == kNumDTypes) {
    return f(T{});
  } else {
    if (static_cast<std::size_t>(t) == I) return f(T{});
    return visit_dtype<F, I + 1>(t, std::forward<F>(f));
  }
}

}  // namespace cumulus
