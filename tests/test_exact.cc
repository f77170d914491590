// The exact-sum reference (exact.h) against the hardware's own correctly rounded additions: IEEE
// 754 rounds a + b once, so for two terms the reference must give the very same bits; and against
// binary128 sums rounded to the half formats where binary128 is exact.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "exact.h"
#include "reference.h"

namespace {

constexpr int kCases = 200000;

template <class T, class Bits>
void expect_same_bits(T got, T want, T a, T b) {
  if (std::isnan(got) && std::isnan(want)) return;
  EXPECT_EQ(std::bit_cast<Bits>(got), std::bit_cast<Bits>(want))
      << std::hexfloat << a << " + " << b << ": " << got << " vs " << want;
}

// Random bit patterns (every class of value), and a second term that cancels most of the first.
template <class T, class Bits>
void check_pairs(std::mt19937_64& rng) {
  for (int i = 0; i < kCases; ++i) {
    const T a = std::bit_cast<T>(static_cast<Bits>(rng()));
    T b = std::bit_cast<T>(static_cast<Bits>(rng()));
    if (i % 4 == 0) b = -a * std::ldexp(T{1}, -static_cast<int>(rng() % 40));
    exact::Sum s;
    s.add(a);
    s.add(b);
    if constexpr (sizeof(T) == 8) {
      expect_same_bits<T, Bits>(s.round_double(), a + b, a, b);
    } else {
      expect_same_bits<T, Bits>(s.round_float(), a + b, a, b);
    }
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ExactReference, Float64PairsMatchIeeeAddition) {
  std::mt19937_64 rng(1);
  check_pairs<double, uint64_t>(rng);
}

TEST(ExactReference, Float32PairsMatchIeeeAddition) {
  std::mt19937_64 rng(2);
  check_pairs<float, uint32_t>(rng);
}

// Three half-format terms within 40 binades of each other: binary128 holds their sum exactly.
void check_half_triples(ref::HalfFormat half, exact::Format format, uint16_t exp_lo, int span) {
  std::mt19937_64 rng(3);
  const auto mant_mask = static_cast<uint16_t>((1u << half.mant_bits) - 1);
  for (int i = 0; i < kCases; ++i) {
    exact::Sum s;
    ref::Quad q = 0;
    for (int k = 0; k < 3; ++k) {
      const auto e = static_cast<uint16_t>(exp_lo + rng() % span);
      const auto bits =
          static_cast<uint16_t>((rng() & (0x8000u | mant_mask)) | (e << half.mant_bits));
      const double d = ref::decode(half, bits);
      s.add(d);
      q += d;
    }
    if (q == 0) continue;  // the sign of an exact zero is checked below
    ASSERT_EQ(s.round_bits(format), ref::round_to(half, q));
  }
}

TEST(ExactReference, HalfSumsMatchBinary128) {
  check_half_triples(ref::kBinary16, exact::kBinary16, 0, 31);
  check_half_triples(ref::kBFloat16, exact::kBFloat16, 100, 40);
}

TEST(ExactReference, KnownCases) {
  const auto sum = [](std::initializer_list<double> terms) {
    exact::Sum s;
    for (double t : terms) s.add(t);
    return s;
  };
  // Cancellation past double's precision; double rounding on the way to the half formats.
  EXPECT_EQ(sum({1e30f, 1, -1e30f}).round_float(), 1.0f);
  EXPECT_EQ(sum({1, 0x1p-11, 0x1p-24}).round_bits(exact::kBinary16), 0x3C01u);
  EXPECT_EQ(sum({1, 0x1p-8, 0x1p-24}).round_bits(exact::kBFloat16), 0x3F81u);
  // A prefix beyond the range is infinite; one that comes back is finite again.
  const double big = std::numeric_limits<double>::max();
  EXPECT_EQ(sum({big, big}).round_double(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(sum({big, big, -big}).round_double(), big);
  EXPECT_EQ(sum({65504, 16}).round_bits(exact::kBinary16), 0x7C00u);  // tie at 65520: to infinity
  EXPECT_EQ(sum({65504, 15.99}).round_bits(exact::kBinary16), 0x7BFFu);
  // Signed zeros: -0 only when every term is -0; the empty sum is +0.
  EXPECT_TRUE(std::signbit(sum({-0.0, -0.0}).round_double()));
  EXPECT_FALSE(std::signbit(sum({-0.0, 0.0}).round_double()));
  EXPECT_FALSE(std::signbit(sum({1, -1}).round_double()));
  EXPECT_FALSE(std::signbit(sum({}).round_double()));
  // Underflow to zero keeps the exact value's sign; subnormals round at their own spacing.
  EXPECT_EQ(sum({-0x1p-30}).round_bits(exact::kBinary16), 0x8000u);
  EXPECT_EQ(sum({0x1p-25, 0x1p-26}).round_bits(exact::kBinary16), 0x0001u);
  EXPECT_EQ(sum({0x1p-25}).round_bits(exact::kBinary16), 0x0000u);  // a tie, to even (zero)
  // Infinities and NaN.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(sum({1, inf, -5}).round_double(), inf);
  EXPECT_TRUE(std::isnan(sum({inf, -inf}).round_double()));
  EXPECT_TRUE(std::isnan(sum({1, std::nan("")}).round_double()));
  EXPECT_EQ(sum({-inf, 3}).round_bits(exact::kBFloat16), 0xFF80u);
}

TEST(ExactReference, CombinedSumsEqualOneSum) {
  std::mt19937_64 rng(4);
  for (int i = 0; i < 1000; ++i) {
    exact::Sum all, left, right;
    for (int k = 0; k < 20; ++k) {
      const double d = std::ldexp(static_cast<double>(static_cast<int64_t>(rng())),
                                  static_cast<int>(rng() % 2000) - 1100);
      all.add(d);
      (k < 10 ? left : right).add(d);
    }
    left.add(right);
    ASSERT_EQ(left.round_bits(exact::kBinary64), all.round_bits(exact::kBinary64));
  }
}

}  // namespace
