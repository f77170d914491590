// The exact product of floating-point factors, for the CumProd tests: a binary128 significand and
// a separate int64 exponent, so no prefix of up to 2^40 factors overflows or underflows however far
// it leaves the double range. Each factor's significand (exact in binary128) is multiplied in
// with one binary128 rounding, at most 2^-113 relative, so after n factors the value is within
// n 2^-112 of the exact product (relative): lower() and upper() bound it. Zeros, infinities and
// NaN follow IEEE multiplication (0 * Inf = NaN, the sign is the XOR of the signs). Shares no
// code with the library.
#pragma once

#include <cmath>
#include <cstdint>

#include "reference.h"

namespace exact {

class Product {
 public:
  void add(double x) {
    ++terms_;
    if (std::signbit(x)) negative_ = !negative_;
    if (std::isnan(x)) {
      nan_ = true;
    } else if (std::isinf(x)) {
      inf_ = true;
    } else if (x == 0) {
      zero_ = true;
    } else {
      int e = 0;
      const double m = std::frexp(std::fabs(x), &e);  // [0.5, 1): exact
      significand_ *= m;
      exponent_ += e;
      if (significand_ < kLow) {  // keeps the significand in [2^-65, 1]; exact scaling
        significand_ *= kHigh;
        exponent_ -= 64;
      }
    }
  }

  bool nan() const { return nan_ || (inf_ && zero_); }
  bool inf() const { return !nan() && inf_; }
  bool zero() const { return !nan() && !inf_ && zero_; }
  bool negative() const { return negative_; }
  int64_t terms() const { return terms_; }

  // The finite non-zero product's magnitude with its accumulated rounding taken off or added
  // (-1 or +1). An exponent beyond +-2100 is clamped there: the value stays far past every format's
  // range (binary128's is wider), so it rounds as the true value does.
  ref::Quad bound(int side) const {
    const ref::Quad slack = static_cast<ref::Quad>(terms_ + 1) * std::ldexp(1.0, -112);
    ref::Quad v = significand_ * (1 + side * slack);
    int64_t e = exponent_;
    if (e > 2100) e = 2100;
    if (e < -2100) e = -2100;
    while (e > 0) {
      const int64_t step = e > 1000 ? 1000 : e;
      v *= pow2(static_cast<int>(step));
      e -= step;
    }
    while (e < 0) {
      const int64_t step = e < -1000 ? -1000 : e;
      v *= pow2(static_cast<int>(step));
      e -= step;
    }
    return v;
  }

 private:
  static ref::Quad pow2(int e) { return std::ldexp(1.0, e); }
  static constexpr double kLow = 0x1p-64;
  static constexpr double kHigh = 0x1p64;

  ref::Quad significand_ = 1;
  int64_t exponent_ = 0;
  int64_t terms_ = 0;
  bool negative_ = false;
  bool nan_ = false;
  bool inf_ = false;
  bool zero_ = false;
};

}  // namespace exact
