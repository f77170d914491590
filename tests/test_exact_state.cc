// The kernels' exact sum (src/kernels/exact.h) against the tests' independent one (exact.h): the
// same terms, the same bits in every format, whatever the terms' range, signs and specials; its
// combine as the addition of the terms; to_pair exact or refused.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "exact.h"
#include "kernels/exact.h"

namespace {

using cumulus::detail::ExactSum;

// Terms of every kind: random bit patterns (subnormals to the largest, both signs), values near
// one scale that cancel, huge values with tiny ones, zeros of both signs, and rare specials.
double draw(std::mt19937_64& rng, int kind) {
  const double unit = std::ldexp(1.0, static_cast<int>(rng() % 2098) - 1074);
  switch (kind) {
    case 0: {
      const double v = std::bit_cast<double>(rng());
      return std::isfinite(v) ? v : 0.0;
    }
    case 1:
      return std::ldexp(static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000),
                        static_cast<int>(rng() % 120) - 60);
    case 2:
      return (rng() % 2 ? 1 : -1) *
             std::ldexp(1.0 + static_cast<double>(rng() % 1024) / 1024, rng() % 2 ? 1000 : -1070);
    case 3:
      return rng() % 2 ? -0.0 : (rng() % 2 ? unit : -unit);
    default: {
      const double specials[] = {std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity(),
                                 std::numeric_limits<double>::quiet_NaN(), -0.0, 0.0};
      return specials[rng() % 5];
    }
  }
}

void expect_same_rounding(const ExactSum& got, const exact::Sum& want, const std::string& what) {
  const double d = got.to_double(), wd = want.round_double();
  if (!(std::isnan(d) && std::isnan(wd))) {
    EXPECT_EQ(std::bit_cast<uint64_t>(d), std::bit_cast<uint64_t>(wd))
        << what << std::hexfloat << " " << d << " vs " << wd;
  }
  const float f = got.to_float(), wf = want.round_float();
  if (!(std::isnan(f) && std::isnan(wf))) {
    EXPECT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(wf)) << what;
  }
  const auto h = want.round_bits(exact::kBinary16), b = want.round_bits(exact::kBFloat16);
  const auto is_nan16 = [](uint64_t v, int exp_mask, int frac_mask) {
    return (v & exp_mask) == static_cast<uint64_t>(exp_mask) && (v & frac_mask) != 0;
  };
  if (!is_nan16(h, 0x7c00, 0x3ff) || !is_nan16(got.to_float16().bits, 0x7c00, 0x3ff)) {
    EXPECT_EQ(got.to_float16().bits, h) << what;
  }
  if (!is_nan16(b, 0x7f80, 0x7f) || !is_nan16(got.to_bfloat16().bits, 0x7f80, 0x7f)) {
    EXPECT_EQ(got.to_bfloat16().bits, b) << what;
  }
}

TEST(ExactSumState, RoundsLikeTheReferenceInEveryFormat) {
  std::mt19937_64 rng(7);
  for (int c = 0; c < 20000; ++c) {
    const int kind = static_cast<int>(rng() % 4);
    const int n = 1 + static_cast<int>(rng() % 12);
    ExactSum got;
    exact::Sum want;
    std::vector<double> terms;
    for (int i = 0; i < n; ++i) {
      // Now and then a term that cancels the sum so far, so results land anywhere below it.
      double x = draw(rng, rng() % 50 == 0 ? 4 : kind);
      if (i > 0 && rng() % 3 == 0) x = -want.round_double();
      if (std::isnan(x) && rng() % 2) x = 1.0;
      terms.push_back(x);
      got.add(x);
      want.add(x);
    }
    std::string what = "terms";
    for (double t : terms) what += " " + std::to_string(t);
    expect_same_rounding(got, want, what);
    if (HasFailure()) return;
  }
}

// A tie decided by a term 2^-1074 far below the last place, in each direction.
TEST(ExactSumState, TiesDecidedFarBelowTheLastPlace) {
  for (double tiny : {0x1p-1074, -0x1p-1074, 0.0}) {
    ExactSum got;
    exact::Sum want;
    for (double x : {1.0, 0x1p-53, tiny}) {
      got.add(x);
      want.add(x);
    }
    expect_same_rounding(got, want, "1 + 2^-53 + " + std::to_string(tiny));
    EXPECT_EQ(got.to_double(), tiny > 0 ? 1.0 + 0x1p-52 : 1.0);
  }
}

TEST(ExactSumState, AddingSumsIsAddingTheirTerms) {
  std::mt19937_64 rng(11);
  for (int c = 0; c < 5000; ++c) {
    ExactSum a, b;
    exact::Sum want;
    for (int i = 0; i < 6; ++i) {
      const double x = draw(rng, static_cast<int>(rng() % 4));
      (i % 2 ? a : b).add(x);
      want.add(x);
    }
    a.add(b);
    expect_same_rounding(a, want, "combined");
    if (HasFailure()) return;
  }
}

// The zero sign: -0 only when there are terms and every one is -0, through combines too.
TEST(ExactSumState, ZeroSignFollowsIeeeAddition) {
  ExactSum empty;
  EXPECT_FALSE(std::signbit(empty.to_double()));
  ExactSum negative;
  negative.add(-0.0);
  negative.add(-0.0);
  EXPECT_TRUE(std::signbit(negative.to_double()));
  EXPECT_EQ(negative.to_float16().bits, 0x8000);
  ExactSum with_empty = negative;
  with_empty.add(empty);
  EXPECT_TRUE(std::signbit(with_empty.to_float()));
  ExactSum into_empty;
  into_empty.add(negative);
  EXPECT_TRUE(std::signbit(into_empty.to_double()));
  ExactSum positive_zero;
  positive_zero.add(0.0);
  ExactSum into_negative = negative;
  into_negative.add(positive_zero);
  EXPECT_FALSE(std::signbit(into_negative.to_double()));
  ExactSum cancelled;
  cancelled.add(-1.0);
  cancelled.add(1.0);
  EXPECT_FALSE(std::signbit(cancelled.to_double()));
  ExactSum mixed = negative;
  mixed.add(0.0);
  EXPECT_FALSE(std::signbit(mixed.to_double()));
  // add_value leaves the record to the caller.
  ExactSum value_only;
  value_only.add_value(-0.0);
  EXPECT_FALSE(value_only.terms().any);
  value_only.add_terms({true, true});
  EXPECT_TRUE(std::signbit(value_only.to_double()));
}

// Many terms: past the normalisation interval would take 2^30 additions; a long run of large
// equal terms and their negatives still cancels exactly, and the count of a million ulps is exact.
TEST(ExactSumState, LongSumsStayExact) {
  ExactSum s;
  for (int i = 0; i < 1000000; ++i) s.add(0x1p-1074);
  EXPECT_EQ(s.to_double(), 1000000 * 0x1p-1074);
  ExactSum big;
  for (int i = 0; i < 300000; ++i) big.add(std::numeric_limits<double>::max());
  EXPECT_TRUE(std::isinf(big.to_double()));
  for (int i = 0; i < 300000; ++i) big.add(-std::numeric_limits<double>::max());
  big.add(1.5);
  EXPECT_EQ(big.to_double(), 1.5);
}

TEST(ExactSumState, PairsAreExactOrRefused) {
  std::mt19937_64 rng(5);
  for (int c = 0; c < 20000; ++c) {
    ExactSum s;
    exact::Sum want;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      const double x = draw(rng, static_cast<int>(rng() % 4));
      s.add(x);
      want.add(x);
    }
    double hi = 0, lo = 0;
    if (!s.to_pair(hi, lo)) continue;
    exact::Sum pair, difference = want;
    pair.add(hi);
    pair.add(lo);
    difference.add(-hi);
    difference.add(-lo);
    EXPECT_EQ(difference.round_double(), 0.0) << std::hexfloat << hi << " + " << lo;
    EXPECT_EQ(hi + lo, hi);
    EXPECT_EQ(pair.round_double(), want.round_double());
  }
  // Three terms too far apart for two doubles, an infinity, a NaN: refused.
  ExactSum wide;
  for (double x : {0x1p1000, 1.0, 0x1p-1000}) wide.add(x);
  double hi = 0, lo = 0;
  EXPECT_FALSE(wide.to_pair(hi, lo));
  ExactSum inf;
  inf.add(std::numeric_limits<double>::infinity());
  EXPECT_FALSE(inf.to_pair(hi, lo));
  ExactSum two;
  for (double x : {0x1p1000, 0x1p-1000}) two.add(x);
  ASSERT_TRUE(two.to_pair(hi, lo));
  EXPECT_EQ(hi, 0x1p1000);
  EXPECT_EQ(lo, 0x1p-1000);
}

}  // namespace
