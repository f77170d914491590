// ExactSum: a fixed-point superaccumulator in units of 2^-1074 (see exact.h).
#include "kernels/exact.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace cumulus::detail {
namespace {

// The units of the accumulator: 2^-kUnitExponent, the weight of the least subnormal double.
constexpr int kUnitExponent = 1074;
__extension__ typedef unsigned __int128 Wide;
constexpr uint64_t kDigitMask = (uint64_t{1} << 32) - 1;

}  // namespace

void ExactSum::add(double x) noexcept {
  terms_.any = true;
  if (!(x == 0 && std::signbit(x))) terms_.only_negative_zeros = false;
  add_value(x);
}

void ExactSum::add_value(double x) noexcept {
  if (std::isnan(x)) {
    nan_ = true;
  } else if (std::isinf(x)) {
    (x > 0 ? positive_inf_ : negative_inf_) = true;
  } else if (x != 0) {
    add_finite(x);
  }
}

void ExactSum::add_finite(double x) noexcept {
  const auto bits = std::bit_cast<uint64_t>(x);
  const auto biased = static_cast<int>((bits >> 52) & 0x7ff);
  uint64_t significand = bits & ((uint64_t{1} << 52) - 1);
  // |x| = significand * 2^(position - 1074): a subnormal's significand counts units directly.
  int position = 0;
  if (biased != 0) {
    significand |= uint64_t{1} << 52;
    position = biased - 1;
  }
  const auto digit = static_cast<std::size_t>(position / kDigitBits);
  const Wide wide = static_cast<Wide>(significand) << (position % kDigitBits);
  const auto d0 = static_cast<int64_t>(static_cast<uint64_t>(wide) & kDigitMask);
  const auto d1 = static_cast<int64_t>(static_cast<uint64_t>(wide >> 32) & kDigitMask);
  const auto d2 = static_cast<int64_t>(static_cast<uint64_t>(wide >> 64));
  if (x < 0) {
    digits_[digit] -= d0;
    digits_[digit + 1] -= d1;
    digits_[digit + 2] -= d2;
  } else {
    digits_[digit] += d0;
    digits_[digit + 1] += d1;
    digits_[digit + 2] += d2;
  }
  if (++adds_ >= kAddsBeforeNormalise) normalise();
}

void ExactSum::add(const ExactSum& other) noexcept {
  if (adds_ + other.adds_ >= kAddsBeforeNormalise) {
    ExactSum copy = other;
    copy.normalise();
    normalise();
    add(copy);
    return;
  }
  for (std::size_t i = 0; i < kDigits; ++i) digits_[i] += other.digits_[i];
  adds_ += other.adds_;
  add_terms(other.terms_);
  positive_inf_ = positive_inf_ || other.positive_inf_;
  negative_inf_ = negative_inf_ || other.negative_inf_;
  nan_ = nan_ || other.nan_;
}

void ExactSum::add_terms(Terms t) noexcept {
  if (!t.any) return;
  terms_.any = true;
  terms_.only_negative_zeros = terms_.only_negative_zeros && t.only_negative_zeros;
}

void ExactSum::normalise() noexcept {
  for (std::size_t i = 0; i + 1 < kDigits; ++i) {
    const int64_t carry = digits_[i] >> kDigitBits;  // floor division: the digit ends in [0, 2^32)
    digits_[i] -= carry * (int64_t{1} << kDigitBits);
    digits_[i + 1] += carry;
  }
  adds_ = 1;
}

namespace {

// The magnitude of a normalised accumulator, as 32-bit digits (all of them below 2^32: a sum of
// fewer than 2^62 finite doubles is below 2^1086, bit 2160 of 2176).
template <std::size_t N>
struct Magnitude {
  std::array<int64_t, N> d;

  bool bit(int i) const { return ((d[static_cast<std::size_t>(i / 32)] >> (i % 32)) & 1) != 0; }
  // Bits [from, from + n) as an integer, n <= 64 - 31.
  uint64_t bits(int from, int n) const {
    const auto i = static_cast<std::size_t>(from / 32);
    Wide w = 0;
    for (std::size_t k = 0; k < 3 && i + k < N; ++k) {
      w |= static_cast<Wide>(static_cast<uint64_t>(d[i + k])) << (32 * k);
    }
    return static_cast<uint64_t>(w >> (from % 32)) & ((uint64_t{1} << n) - 1);
  }
  // Any bit below `i`.
  bool any_below(int i) const {
    const auto digit = static_cast<std::size_t>(i / 32);
    for (std::size_t k = 0; k < digit; ++k) {
      if (d[k] != 0) return true;
    }
    return (static_cast<uint64_t>(d[digit]) & ((uint64_t{1} << (i % 32)) - 1)) != 0;
  }
  // The index of the highest set bit, or -1.
  int top() const {
    for (std::size_t k = N; k-- > 0;) {
      if (d[k] != 0) {
        return static_cast<int>(32 * k + std::bit_width(static_cast<uint64_t>(d[k]))) - 1;
      }
    }
    return -1;
  }
};

template <class Out>
Out from_double(double v) {
  if constexpr (std::is_same_v<Out, double>) {
    return v;
  } else if constexpr (std::is_same_v<Out, float>) {
    return static_cast<float>(v);
  } else if constexpr (std::is_same_v<Out, Float16>) {
    return to_float16(v);
  } else {
    return to_bfloat16(v);
  }
}

}  // namespace

// Rounds to a binary format of `precision` significand bits whose normal numbers have exponents
// [emin, emax]: one rounding to nearest, ties to even, from the exact integer. The result is
// exactly representable in double, so converting it to Out does not round again.
template <class Out>
Out ExactSum::round_as(int precision, int emin, int emax) const noexcept {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (nan_ || (positive_inf_ && negative_inf_)) {
    return from_double<Out>(std::numeric_limits<double>::quiet_NaN());
  }
  if (positive_inf_ || negative_inf_) return from_double<Out>(positive_inf_ ? kInf : -kInf);

  ExactSum value = *this;
  value.normalise();
  const bool negative = value.digits_[kDigits - 1] < 0;
  if (negative) {
    for (auto& digit : value.digits_) digit = -digit;
    value.normalise();
  }
  const Magnitude<kDigits> m{value.digits_};
  const int top = m.top();
  if (top < 0) {
    return from_double<Out>(terms_.any && terms_.only_negative_zeros ? -0.0 : 0.0);
  }
  const int exponent = top - kUnitExponent;  // 2^exponent <= |sum| < 2^(exponent + 1)
  double magnitude = kInf;
  if (exponent <= emax) {
    const int ulp = std::max(exponent, emin) - (precision - 1);
    const int low = ulp + kUnitExponent;  // the bit that weighs one ulp (>= 0 for binary64)
    uint64_t kept = top >= low ? m.bits(low, top - low + 1) : 0;
    if (low > 0 && m.bit(low - 1) && ((kept & 1) != 0 || m.any_below(low - 1))) ++kept;
    // Rounding up may carry into a new binade, and past the largest finite number.
    if (static_cast<int>(std::bit_width(kept)) - 1 + ulp <= emax) {
      magnitude = std::ldexp(static_cast<double>(kept), ulp);
    }
  }
  return from_double<Out>(negative ? -magnitude : magnitude);
}

double ExactSum::to_double() const noexcept { return round_as<double>(53, -1022, 1023); }
float ExactSum::to_float() const noexcept { return round_as<float>(24, -126, 127); }
Float16 ExactSum::to_float16() const noexcept { return round_as<Float16>(11, -14, 15); }
BFloat16 ExactSum::to_bfloat16() const noexcept { return round_as<BFloat16>(8, -126, 127); }

bool ExactSum::to_pair(double& hi, double& lo) const noexcept {
  if (special()) return false;
  const double h = to_double();
  if (std::isinf(h)) return false;
  ExactSum rest = *this;
  rest.add_value(-h);
  const double l = rest.to_double();
  rest.add_value(-l);
  rest.normalise();
  for (int64_t digit : rest.digits_) {
    if (digit != 0) return false;
  }
  hi = h;
  lo = l == 0 ? 0.0 : l;
  return true;
}

}  // namespace cumulus::detail

namespace cumulus::detail {
namespace {

template <class T>
void append(std::vector<std::byte>& out, T v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}
template <class T>
bool take(std::span<const std::byte> in, std::size_t& offset, T& v) {
  if (in.size() - offset < sizeof v) return false;
  std::memcpy(&v, in.data() + offset, sizeof v);
  offset += sizeof v;
  return true;
}

}  // namespace

// Flags byte, then the first nonzero digit below the top one and how many follow (each a 32-bit
// digit of the normalised integer), then the signed top digit.
void ExactSum::append_bytes(std::vector<std::byte>& out) const {
  ExactSum n = *this;
  n.normalise();
  const auto flags =
      static_cast<uint8_t>((terms_.any ? 1 : 0) | (terms_.only_negative_zeros ? 2 : 0) |
                           (positive_inf_ ? 4 : 0) | (negative_inf_ ? 8 : 0) | (nan_ ? 16 : 0));
  std::size_t first = 0, end = kDigits - 1;
  while (first < end && n.digits_[first] == 0) ++first;
  while (end > first && n.digits_[end - 1] == 0) --end;
  append(out, flags);
  append(out, static_cast<uint8_t>(first));
  append(out, static_cast<uint8_t>(end - first));
  for (std::size_t i = first; i < end; ++i) append(out, static_cast<uint32_t>(n.digits_[i]));
  append(out, n.digits_[kDigits - 1]);
}

bool ExactSum::read_bytes(std::span<const std::byte> in, std::size_t& offset, ExactSum& out) {
  std::size_t at = offset;
  uint8_t flags = 0, first = 0, count = 0;
  if (!take(in, at, flags) || !take(in, at, first) || !take(in, at, count)) return false;
  if (flags > 31 || first + count > kDigits - 1) return false;
  ExactSum s;
  for (std::size_t i = first; i < std::size_t{first} + count; ++i) {
    uint32_t digit = 0;
    if (!take(in, at, digit)) return false;
    s.digits_[i] = digit;
  }
  int64_t top = 0;
  // A normalised top digit of fewer than 2^62 terms' sum is tiny: anything larger is not ours.
  if (!take(in, at, top) || top < -(int64_t{1} << 31) || top >= (int64_t{1} << 31)) return false;
  s.digits_[kDigits - 1] = top;
  s.terms_ = {(flags & 1) != 0, (flags & 2) != 0};
  s.positive_inf_ = (flags & 4) != 0;
  s.negative_inf_ = (flags & 8) != 0;
  s.nan_ = (flags & 16) != 0;
  out = s;
  offset = at;
  return true;
}

}  // namespace cumulus::detail
