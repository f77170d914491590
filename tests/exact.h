// An exact sum of floating-point values and its rounding to each format, for the tests.
//
// Independent of the library: every finite double is an integer multiple of 2^-1074 below 2^1024,
// so a two's complement integer of 34 64-bit words counts, in units of 2^-1074, any sum of up to
// 2^64 of them exactly. Rounding to a format reads the bits of that integer and rounds to nearest,
// ties to even, with subnormals and overflow, as IEEE 754 defines it for one operation. Infinities,
// NaN and the sign of a zero follow IEEE addition: an infinity makes the sum infinite, opposite
// infinities or a NaN make it NaN, and an exactly zero sum is -0 only when every term is -0. Slow
// on purpose: a few hundred instructions a term.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

namespace exact {

// A binary format: `precision` significand bits (the leading one included) and the exponent range
// of its normal numbers, [emin, emax].
struct Format {
  int precision;
  int emin;
  int emax;
  int exp_bits;
};
inline constexpr Format kBinary16{11, -14, 15, 5};
inline constexpr Format kBFloat16{8, -126, 127, 8};
inline constexpr Format kBinary32{24, -126, 127, 8};
inline constexpr Format kBinary64{53, -1022, 1023, 11};

class Sum {
 public:
  // Adds x exactly; x may be any double, an infinity or a NaN.
  void add(double x) {
    ++terms_;
    if (!std::signbit(x) || x != 0) all_negative_zero_ = false;
    if (std::isnan(x)) {
      nan_ = true;
      return;
    }
    if (std::isinf(x)) {
      (x > 0 ? positive_inf_ : negative_inf_) = true;
      return;
    }
    if (x == 0) return;
    int e = 0;
    const double m = std::frexp(std::fabs(x), &e);  // |x| = m * 2^e, m in [0.5, 1)
    // |x| = significand * 2^(e - 53); a subnormal has fewer bits, and e - 53 >= -1074 - 52.
    auto significand = static_cast<uint64_t>(std::ldexp(m, 53));
    int position = e - 53 + kFractionBits;
    while (position < 0) {  // trailing zero bits of a subnormal's widened significand
      significand >>= 1;
      ++position;
    }
    add_shifted(significand, position, x < 0);
  }
  void add(const Sum& other) {
    uint64_t carry = 0;
    for (std::size_t i = 0; i < kWords; ++i) {
      const unsigned __int128 t =
          static_cast<unsigned __int128>(words_[i]) + other.words_[i] + carry;
      words_[i] = static_cast<uint64_t>(t);
      carry = static_cast<uint64_t>(t >> 64);
    }
    terms_ += other.terms_;
    all_negative_zero_ = all_negative_zero_ && other.all_negative_zero_;
    nan_ = nan_ || other.nan_;
    positive_inf_ = positive_inf_ || other.positive_inf_;
    negative_inf_ = negative_inf_ || other.negative_inf_;
  }

  // The sum rounded once to `format`, as its bit pattern (the low 16, 32 or 64 bits).
  uint64_t round_bits(Format format) const {
    const int total_bits = 1 + format.exp_bits + format.precision - 1;
    const uint64_t sign_mask = uint64_t{1} << (total_bits - 1);
    const uint64_t inf_bits = ((uint64_t{1} << format.exp_bits) - 1) << (format.precision - 1);
    if (nan_ || (positive_inf_ && negative_inf_)) {
      return inf_bits | (uint64_t{1} << (format.precision - 2));  // a quiet NaN
    }
    if (positive_inf_) return inf_bits;
    if (negative_inf_) return sign_mask | inf_bits;

    std::array<uint64_t, kWords> magnitude = words_;
    const bool negative = (magnitude[kWords - 1] >> 63) != 0;
    if (negative) negate(magnitude);
    const int top = highest_bit(magnitude);
    if (top < 0) return all_negative_zero_ && terms_ > 0 ? sign_mask : 0;
    const uint64_t sign = negative ? sign_mask : 0;

    // The quantum: the value of the last significand bit kept, at least the subnormal spacing.
    const int exponent = top - kFractionBits;
    const int quantum =
        std::max(exponent - format.precision + 1, format.emin - format.precision + 1);
    const int shift = quantum + kFractionBits;  // bit index of the quantum in the integer
    // shift >= 0: no format's subnormal spacing is below 2^-1074.
    uint64_t kept = bits_from(magnitude, shift, top);
    if (shift > 0 && bit(magnitude, shift - 1) &&
        (any_below(magnitude, shift - 1) || (kept & 1) != 0)) {
      ++kept;
    }
    if (kept == 0) return sign;  // underflow to zero keeps the sign of the exact value
    int q = quantum;
    if (kept >> format.precision != 0) {  // rounding carried into a new binade
      kept >>= 1;
      ++q;
    }
    const int bits_in_kept = std::bit_width(kept);
    if (q + bits_in_kept - 1 > format.emax) return sign | inf_bits;
    const uint64_t hidden = uint64_t{1} << (format.precision - 1);
    if (kept >= hidden) {
      const auto biased = static_cast<uint64_t>(q + format.precision - 1 + bias(format));
      return sign | (biased << (format.precision - 1)) | (kept - hidden);
    }
    return sign | kept;  // subnormal: q is the subnormal spacing
  }

  float round_float() const {
    return std::bit_cast<float>(static_cast<uint32_t>(round_bits(kBinary32)));
  }
  double round_double() const { return std::bit_cast<double>(round_bits(kBinary64)); }

 private:
  static constexpr int kFractionBits = 1074;
  static constexpr std::size_t kWords = 34;

  static int bias(Format f) { return (1 << (f.exp_bits - 1)) - 1; }

  void add_shifted(uint64_t value, int position, bool subtract) {
    const auto word = static_cast<std::size_t>(position / 64);
    const int offset = position % 64;
    std::array<uint64_t, kWords> addend{};
    addend[word] = value << offset;
    if (offset != 0 && word + 1 < kWords) addend[word + 1] = value >> (64 - offset);
    if (subtract) negate(addend);
    uint64_t carry = 0;
    for (std::size_t i = 0; i < kWords; ++i) {
      const unsigned __int128 t = static_cast<unsigned __int128>(words_[i]) + addend[i] + carry;
      words_[i] = static_cast<uint64_t>(t);
      carry = static_cast<uint64_t>(t >> 64);
    }
  }
  static void negate(std::array<uint64_t, kWords>& w) {
    uint64_t carry = 1;
    for (uint64_t& x : w) {
      const unsigned __int128 t = static_cast<unsigned __int128>(~x) + carry;
      x = static_cast<uint64_t>(t);
      carry = static_cast<uint64_t>(t >> 64);
    }
  }
  static int highest_bit(const std::array<uint64_t, kWords>& w) {
    for (std::size_t i = kWords; i-- > 0;) {
      if (w[i] != 0) return static_cast<int>(i * 64) + std::bit_width(w[i]) - 1;
    }
    return -1;
  }
  static bool bit(const std::array<uint64_t, kWords>& w, int i) {
    return ((w[static_cast<std::size_t>(i / 64)] >> (i % 64)) & 1) != 0;
  }
  static bool any_below(const std::array<uint64_t, kWords>& w, int i) {
    const auto word = static_cast<std::size_t>(i / 64);
    for (std::size_t k = 0; k < word; ++k) {
      if (w[k] != 0) return true;
    }
    return (w[word] & ((uint64_t{1} << (i % 64)) - 1)) != 0;
  }
  // Bits [from, to] as an integer (to - from < 64).
  static uint64_t bits_from(const std::array<uint64_t, kWords>& w, int from, int to) {
    uint64_t v = 0;
    for (int b = to; b >= from; --b) v = (v << 1) | (bit(w, b) ? 1 : 0);
    return v;
  }

  std::array<uint64_t, kWords> words_{};
  uint64_t terms_ = 0;
  bool all_negative_zero_ = true;
  bool nan_ = false;
  bool positive_inf_ = false;
  bool negative_inf_ = false;
};

}  // namespace exact
