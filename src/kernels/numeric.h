// The wide types the kernels accumulate in, and the one rounding back.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cumulus/dtype.h"

namespace cumulus::detail {

// Floating types accumulate in double; integers in unsigned arithmetic of their width, which
// wraps around as two's complement does, without undefined behaviour.
template <class T>
struct Numeric {
  using Wide = double;
  static Wide widen(T v) noexcept { return static_cast<double>(v); }
  static T narrow(Wide v) noexcept { return static_cast<T>(v); }
};
template <>
struct Numeric<Float16> {
  using Wide = double;
  static Wide widen(Float16 v) noexcept { return to_float(v); }
  static Float16 narrow(Wide v) noexcept { return to_float16(v); }
};
template <>
struct Numeric<BFloat16> {
  using Wide = double;
  static Wide widen(BFloat16 v) noexcept { return to_float(v); }
  static BFloat16 narrow(Wide v) noexcept { return to_bfloat16(v); }
};
template <class T>
requires std::is_integral_v<T>
struct Numeric<T> {
  using Wide = std::make_unsigned_t<T>;
  static Wide widen(T v) noexcept { return static_cast<Wide>(v); }
  static T narrow(Wide v) noexcept { return static_cast<T>(v); }
};

struct AddOp {
  template <class W>
  static constexpr W identity() noexcept {
    return W{0};
  }
  template <class W>
  static W apply(W a, W b) noexcept {
    return static_cast<W>(a + b);
  }
};
struct MulOp {
  template <class W>
  static constexpr W identity() noexcept {
    return W{1};
  }
  template <class W>
  static W apply(W a, W b) noexcept {
    return static_cast<W>(a * b);
  }
};

}  // namespace cumulus::detail
