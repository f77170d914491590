// The exact sum of any number of doubles, and its rounding, once, to each floating type: the state
// a floating CumSum carries from one piece of a row to the next, and the kernels' slow path where
// a fast accumulator cannot prove its result exact.
//
// Every finite double is an integer multiple of 2^-1074 below 2^1024, so a fixed-point integer in
// those units holds any sum of them exactly (R. Neal, "Fast exact summation using small and large
// superaccumulators", arXiv:1505.05571, keeps it in the same way: 32-bit digits in 64-bit words,
// whose spare high bits absorb carries until a normalisation). Infinities, NaN and the sign of a
// zero follow IEEE addition: an infinity makes the sum infinite, opposite infinities or a NaN make
// it NaN, and an exactly zero sum is -0 only when it has terms and every one is -0.
//
// Compiled once, for the baseline instruction set (exact.cc); the kernels of every instruction
// set call it, so it gives the same bits everywhere. Not fast: tens of nanoseconds a term.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cumulus/dtype.h"

namespace cumulus::detail {

class ExactSum {
 public:
  // Adds x exactly: any double, including -0, infinities and NaN.
  void add(double x) noexcept;
  // Adds the value of a finite x but leaves the record of terms alone (see add_terms): for a
  // caller that keeps its own zero-sign record, as the fast kernels do.
  void add_value(double x) noexcept;
  // Adds every term of `other`, as if they were added here one by one.
  void add(const ExactSum& other) noexcept;

  // The record of terms that decides the sign of an exactly zero sum: whether there are any, and
  // whether every one is -0.
  struct Terms {
    bool any = false;
    bool only_negative_zeros = true;
  };
  Terms terms() const noexcept { return terms_; }
  // Merges another record, as if its terms had been added here.
  void add_terms(Terms t) noexcept;

  // An infinity or a NaN among the terms: the sum is not the finite part's.
  bool special() const noexcept { return positive_inf_ || negative_inf_ || nan_; }

  // The sum rounded once to nearest, ties to even, in each type.
  double to_double() const noexcept;
  float to_float() const noexcept;
  Float16 to_float16() const noexcept;
  BFloat16 to_bfloat16() const noexcept;

  // When the sum is finite and equals hi + lo exactly for doubles with hi = RN(hi + lo) (lo is 0
  // when one double holds it), sets them and returns true: a fast path can carry on from there.
  bool to_pair(double& hi, double& lo) const noexcept;

  // A compact byte form (the record of terms, the specials, the nonzero digits), appended to
  // `out`, and back: read_bytes takes the bytes at `offset` and moves past them, or returns false
  // (out and offset untouched) where they are not a state this class writes.
  void append_bytes(std::vector<std::byte>& out) const;
  static bool read_bytes(std::span<const std::byte> in, std::size_t& offset, ExactSum& out);

 private:
  // 32-bit digits of a two's complement integer in units of 2^-1074: digit i weighs 2^(32 i).
  // 2098 bits hold every finite double; the top digits leave room for 2^62 terms' carries.
  static constexpr std::size_t kDigits = 68;
  static constexpr int kDigitBits = 32;
  // Digits take at most this many additions between normalisations (each adds less than 2^32 in
  // magnitude to a 64-bit word).
  static constexpr uint32_t kAddsBeforeNormalise = (1u << 30);

  void add_finite(double x) noexcept;
  void normalise() noexcept;  // every digit in [0, 2^32) but the top one, which holds the sign
  template <class Out>
  Out round_as(int precision, int emin, int emax) const noexcept;

  std::array<int64_t, kDigits> digits_{};
  uint32_t adds_ = 0;
  Terms terms_;
  bool positive_inf_ = false;
  bool negative_inf_ = false;
  bool nan_ = false;
};

}  // namespace cumulus::detail
