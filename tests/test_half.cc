// The half-precision conversions of dtype.h against the independent reference in reference.h:
// patterns decoded from their bit fields, narrowing by searching the table of representable values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cumulus/dtype.h"
#include "reference.h"

namespace {

using cumulus::BFloat16;
using cumulus::Float16;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Both formats behind one interface, so every test runs on each.
struct Format {
  const char* name;
  ref::HalfFormat f;
  float (*widen)(uint16_t);
  uint16_t (*narrow)(double);
};
const Format kFormats[] = {
    {"float16", ref::kBinary16, [](uint16_t b) { return cumulus::to_float(Float16{b}); },
     [](double v) { return cumulus::to_float16(v).bits; }},
    {"bfloat16", ref::kBFloat16, [](uint16_t b) { return cumulus::to_float(BFloat16{b}); },
     [](double v) { return cumulus::to_bfloat16(v).bits; }},
};

uint64_t test_seed() {
  const char* env = std::getenv("CUMULUS_TEST_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 0) : 0x5eed'4a1fULL;
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}
std::string describe(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g (%a)", v, v);
  return buf;
}

// Collects mismatches and reports the first few, so a broken conversion does not print 65536
// failures yet the count of all of them is visible.
class Misses {
 public:
  explicit Misses(std::string what) : what_(std::move(what)) {}
  void add(const std::string& message) {
    if (++count_ <= 8) ADD_FAILURE() << what_ << ": " << message;
  }
  ~Misses() {
    if (count_ > 8) ADD_FAILURE() << what_ << ": " << count_ << " mismatches in all";
  }

 private:
  std::string what_;
  int64_t count_ = 0;
};

// Checks narrow(v) against an expected pattern; NaN only needs to be some NaN of the same sign.
void expect_narrow(const Format& fmt, double v, uint16_t want, Misses& misses) {
  const uint16_t got = fmt.narrow(v);
  if (ref::half_is_nan(fmt.f, want)) {
    if (!ref::half_is_nan(fmt.f, got) || (got >> 15) != (want >> 15)) {
      misses.add("narrow(" + describe(v) + ") = " + hex(got) + ", want a NaN with sign " +
                 std::to_string(want >> 15));
    }
    return;
  }
  if (got != want) {
    misses.add("narrow(" + describe(v) + ") = " + hex(got) + " (" +
               describe(ref::decode(fmt.f, got)) + "), want " + hex(want) + " (" +
               describe(ref::decode(fmt.f, want)) + ")");
  }
}

void PrintTo(const Format& f, std::ostream* os) { *os << f.name; }

class HalfTest : public ::testing::TestWithParam<Format> {};

// The reference decoder itself, on values everyone knows, so the rest stands on firm ground.
TEST(HalfReference, DecoderAndRounderKnownValues) {
  EXPECT_EQ(ref::decode(ref::kBinary16, 0x3C00), 1.0);
  EXPECT_EQ(ref::decode(ref::kBinary16, 0xC000), -2.0);
  EXPECT_EQ(ref::decode(ref::kBinary16, 0x7BFF), 65504.0);
  EXPECT_EQ(ref::decode(ref::kBinary16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(ref::decode(ref::kBinary16, 0x0400), std::ldexp(1.0, -14));
  EXPECT_EQ(ref::decode(ref::kBinary16, 0x3555), 0.333251953125);
  EXPECT_EQ(ref::decode(ref::kBinary16, 0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(ref::decode(ref::kBinary16, 0x7E00)));
  EXPECT_EQ(ref::decode(ref::kBFloat16, 0x3F80), 1.0);
  EXPECT_EQ(ref::decode(ref::kBFloat16, 0x4049), 3.140625);
  EXPECT_EQ(ref::decode(ref::kBFloat16, 0x7F7F), 0x1.fep127);
  EXPECT_EQ(ref::decode(ref::kBFloat16, 0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(ref::decode(ref::kBFloat16, 0xFF80), -kInf);
  EXPECT_EQ(ref::round_to(ref::kBinary16, 1.0 + std::ldexp(1.0, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(ref::round_to(ref::kBinary16, 1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);
  EXPECT_EQ(ref::round_to(ref::kBinary16, 65520.0), 0x7C00);
  EXPECT_EQ(ref::round_to(ref::kBinary16, 65519.0), 0x7BFF);
  EXPECT_EQ(ref::round_to(ref::kBinary16, -0.0), 0x8000);
  EXPECT_EQ(ref::round_to(ref::kBFloat16, 1.0 / 3.0), 0x3EAB);
  EXPECT_EQ(ref::round_to(ref::kBFloat16, 0x1.ffp127), 0x7F80);
}

TEST_P(HalfTest, WidensEveryPatternExactly) {
  const Format& fmt = GetParam();
  Misses misses(std::string("widen ") + fmt.name);
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float got = fmt.widen(bits);
    const double want = ref::decode(fmt.f, bits);
    const bool sign_ok = std::signbit(got) == ((bits >> 15) != 0);
    if (std::isnan(want)) {
      if (!std::isnan(got) || !sign_ok)
        misses.add(hex(bits) + " -> " + describe(got) + ", want NaN");
    } else if (static_cast<double>(got) != want || !sign_ok) {
      misses.add(hex(bits) + " -> " + describe(got) + ", want " + describe(want));
    }
  }
}

// bfloat16 is the top half of a binary32, so widening is a shift for every non-NaN pattern.
TEST(HalfBFloat16, WideningIsTheTopHalfOfAFloat) {
  Misses misses("bfloat16 widen bits");
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    if (ref::half_is_nan(ref::kBFloat16, bits)) continue;
    const auto got = std::bit_cast<uint32_t>(cumulus::to_float(BFloat16{bits}));
    if (got != b << 16) misses.add(hex(b) + " -> " + hex(got));
  }
}

TEST_P(HalfTest, EveryPatternRoundTrips) {
  const Format& fmt = GetParam();
  Misses misses(std::string("round trip ") + fmt.name);
  int nans = 0;
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    nans += ref::half_is_nan(fmt.f, bits) ? 1 : 0;
    // NaNs (quiet and signalling payloads) must come back as a NaN of the same sign.
    expect_narrow(fmt, fmt.widen(bits), bits, misses);
    expect_narrow(fmt, ref::decode(fmt.f, bits), bits, misses);
  }
  EXPECT_EQ(nans, 2 * ((1 << fmt.f.mant_bits) - 1));
}

// For every pair of neighbouring representable values lo < hi (the last pair is the largest
// finite value and the overflow value 2^(emax+1), i.e. infinity): the midpoint goes to the even
// pattern, anything above it to hi and anything below to lo. The expected results here come from
// the definition, not from the reference rounder, and the rounder is checked against them too.
TEST_P(HalfTest, MidpointsTiesToEvenAndNeighbours) {
  const Format& fmt = GetParam();
  Misses misses(std::string("midpoints ") + fmt.name);
  Misses ref_misses(std::string("reference rounder on midpoints ") + fmt.name);
  int ties_down = 0;
  int ties_up = 0;
  for (uint32_t lo = 0; lo <= fmt.f.max_finite_bits(); ++lo) {
    const uint32_t hi = lo + 1;
    const double lo_value = ref::decode(fmt.f, static_cast<uint16_t>(lo));
    const double hi_value = hi == fmt.f.inf_bits() ? ref::overflow_value(fmt.f)
                                                   : ref::decode(fmt.f, static_cast<uint16_t>(hi));
    const double mid = (lo_value + hi_value) / 2;  // exact: few significant bits
    ASSERT_LT(lo_value, mid);
    ASSERT_LT(mid, hi_value);
    const uint32_t even = lo % 2 == 0 ? lo : hi;
    (even == lo ? ties_down : ties_up)++;
    const struct {
      double v;
      uint32_t want;
    } cases[] = {
        {mid, even},
        {std::nextafter(mid, kInf), hi},
        {std::nextafter(mid, 0.0), lo},
        {mid + (hi_value - lo_value) / 4, hi},
        {mid - (hi_value - lo_value) / 4, lo},
        {lo_value, lo},
    };
    for (const auto& c : cases) {
      for (const uint32_t sign : {0u, 0x8000u}) {
        const double v = sign != 0 ? -c.v : c.v;
        const auto want = static_cast<uint16_t>(c.want | sign);
        expect_narrow(fmt, v, want, misses);
        if (ref::round_to(fmt.f, v) != want) {
          ref_misses.add(describe(v) + " -> " + hex(ref::round_to(fmt.f, v)) + ", want " +
                         hex(want));
        }
      }
    }
  }
  EXPECT_GT(ties_down, 1000);
  EXPECT_GT(ties_up, 1000);
}

// Going through float first rounds twice and breaks ties that are not ties. For every pair of
// neighbours, the double just above (below) the midpoint rounds to the midpoint in float, and the
// float would then tie to even; straight from double it must go up (down).
TEST_P(HalfTest, NoDoubleRoundingThroughFloat) {
  const Format& fmt = GetParam();
  Misses misses(std::string("double rounding ") + fmt.name);
  int hazards = 0;
  for (uint32_t lo = 0; lo < fmt.f.max_finite_bits(); ++lo) {
    const double lo_value = ref::decode(fmt.f, static_cast<uint16_t>(lo));
    const double hi_value = ref::decode(fmt.f, static_cast<uint16_t>(lo + 1));
    const double mid = (lo_value + hi_value) / 2;
    const double above = mid + mid * std::ldexp(1.0, -40);
    const double below = mid - mid * std::ldexp(1.0, -40);
    if (static_cast<float>(above) != static_cast<float>(mid) ||
        static_cast<float>(below) != static_cast<float>(mid)) {
      continue;  // the float path would not double-round here
    }
    ++hazards;
    expect_narrow(fmt, above, static_cast<uint16_t>(lo + 1), misses);
    expect_narrow(fmt, below, static_cast<uint16_t>(lo), misses);
    expect_narrow(fmt, -above, static_cast<uint16_t>((lo + 1) | 0x8000u), misses);
  }
  // Every pair but those whose midpoint is at the very bottom of float's range is a hazard.
  EXPECT_GT(hazards, 30000);
}

// The textbook case spelled out: 1 + 2^-11 + 2^-40 in binary16 (1 + 2^-8 + 2^-40 in bfloat16).
TEST(HalfDoubleRounding, ExplicitCase) {
  const double f16_case = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<float>(f16_case), 1.0f + std::ldexp(1.0f, -11));  // float lands on the tie
  EXPECT_EQ(cumulus::to_float16(f16_case).bits, 0x3C01);                  // not 0x3C00
  EXPECT_EQ(cumulus::to_float16(-f16_case).bits, 0xBC01);
  const double f16_below = 1.0 + 3 * std::ldexp(1.0, -11) - std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<float>(f16_below), 1.0f + 3 * std::ldexp(1.0f, -11));
  EXPECT_EQ(cumulus::to_float16(f16_below).bits, 0x3C01);  // not 0x3C02
  const double bf16_case = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<float>(bf16_case), 1.0f + std::ldexp(1.0f, -8));
  EXPECT_EQ(cumulus::to_bfloat16(bf16_case).bits, 0x3F81);  // not 0x3F80
}

TEST_P(HalfTest, RandomDoublesAcrossTheWholeRange) {
  const Format& fmt = GetParam();
  const uint64_t seed = test_seed();
  RecordProperty("seed", std::to_string(seed));
  SCOPED_TRACE("seed " + std::to_string(seed) + " (set CUMULUS_TEST_SEED to change)");
  std::printf("[ seed     ] %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Misses misses(std::string("random ") + fmt.name);
  const int emin = 1 - fmt.f.bias() - fmt.f.mant_bits - 3;  // below half the smallest subnormal
  const int emax = fmt.f.bias() + 3;                        // beyond the overflow threshold
  std::uniform_int_distribution<int> exponent(emin, emax);
  constexpr int kCount = 1 << 19;
  for (int i = 0; i < kCount; ++i) {
    // Any double bit pattern (NaNs included) ...
    const double any = std::bit_cast<double>(rng());
    expect_narrow(fmt, any, ref::round_to(fmt.f, any), misses);
    // ... and doubles with exponents where the format lives, full 53-bit significands.
    const double mant = 1.0 + static_cast<double>(rng() >> 12) * std::ldexp(1.0, -52);
    const double v = std::ldexp(rng() % 2 != 0 ? -mant : mant, exponent(rng));
    expect_narrow(fmt, v, ref::round_to(fmt.f, v), misses);
  }
}

// The subnormal range on a grid of a quarter of the smallest subnormal (exact midpoints and the
// points halfway between them), then random points in it.
TEST_P(HalfTest, SubnormalRange) {
  const Format& fmt = GetParam();
  Misses misses(std::string("subnormal ") + fmt.name);
  const int min_exp = 1 - fmt.f.bias() - fmt.f.mant_bits;  // smallest subnormal is 2^min_exp
  const int grid = 4 << fmt.f.mant_bits;                   // up to twice the smallest normal
  for (int k = 0; k <= grid; ++k) {
    const double v = std::ldexp(static_cast<double>(k), min_exp - 2);
    // k/4 subnormal steps: .25 rounds down, .75 up, .5 to even.
    const int steps = k / 4;
    const int frac = k % 4;
    uint32_t want = static_cast<uint32_t>(steps);
    if (frac == 3 || (frac == 2 && steps % 2 == 1)) ++want;
    if (v <= ref::decode(fmt.f, static_cast<uint16_t>(1u << fmt.f.mant_bits))) {  // normal above
      expect_narrow(fmt, v, static_cast<uint16_t>(want), misses);
      expect_narrow(fmt, -v, static_cast<uint16_t>(want | 0x8000u), misses);
    }
    expect_narrow(fmt, v, ref::round_to(fmt.f, v), misses);
  }
  std::mt19937_64 rng(test_seed() + 1);
  std::uniform_real_distribution<double> u(0.0, std::ldexp(1.0, min_exp + fmt.f.mant_bits + 1));
  for (int i = 0; i < 200000; ++i) {
    const double v = u(rng);
    expect_narrow(fmt, v, ref::round_to(fmt.f, v), misses);
  }
  // Tiny magnitudes keep their sign as zeros.
  expect_narrow(fmt, std::ldexp(1.0, min_exp - 1), 0x0000, misses);   // tie with 0 -> 0 (even)
  expect_narrow(fmt, -std::ldexp(1.0, min_exp - 1), 0x8000, misses);  // -0
  expect_narrow(fmt, std::nextafter(std::ldexp(1.0, min_exp - 1), kInf), 0x0001, misses);
  expect_narrow(fmt, std::ldexp(3.0, min_exp - 1), 0x0002, misses);  // 1.5 steps -> 2 (even)
  expect_narrow(fmt, std::numeric_limits<double>::denorm_min(), 0x0000, misses);
  expect_narrow(fmt, -std::numeric_limits<double>::denorm_min(), 0x8000, misses);
  expect_narrow(fmt, 1e-300, 0x0000, misses);
  expect_narrow(fmt, 0.0, 0x0000, misses);
  expect_narrow(fmt, -0.0, 0x8000, misses);
}

TEST_P(HalfTest, OverflowThreshold) {
  const Format& fmt = GetParam();
  Misses misses(std::string("overflow ") + fmt.name);
  const uint16_t max = fmt.f.max_finite_bits();
  const uint16_t inf = fmt.f.inf_bits();
  const double max_value = ref::decode(fmt.f, max);
  const double threshold = (max_value + ref::overflow_value(fmt.f)) / 2;  // max + half an ulp
  const struct {
    double v;
    uint16_t want;
  } cases[] = {
      {max_value, max},
      {std::nextafter(max_value, kInf), max},
      {std::nextafter(threshold, 0.0), max},
      {threshold, inf},  // a tie between max (odd) and 2^(emax+1) (even): infinity
      {std::nextafter(threshold, kInf), inf},
      {ref::overflow_value(fmt.f), inf},
      {static_cast<double>(std::numeric_limits<float>::max()), inf},
      {1e300, inf},
      {std::numeric_limits<double>::max(), inf},
      {kInf, inf},
  };
  for (const auto& c : cases) {
    expect_narrow(fmt, c.v, c.want, misses);
    expect_narrow(fmt, -c.v, static_cast<uint16_t>(c.want | 0x8000u), misses);
    EXPECT_EQ(ref::round_to(fmt.f, c.v), c.want) << describe(c.v);
  }
  EXPECT_EQ(fmt.widen(inf), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fmt.widen(static_cast<uint16_t>(inf | 0x8000u)),
            -std::numeric_limits<float>::infinity());
}

// Double NaNs with quiet and signalling payloads, either sign: a NaN of the same sign, never an
// infinity (a payload that lives only in the low bits must not be shifted away).
TEST_P(HalfTest, NaNInGivesNaNOut) {
  const Format& fmt = GetParam();
  Misses misses(std::string("NaN ") + fmt.name);
  const uint64_t payloads[] = {
      0x7FF8000000000000ULL,  // the default quiet NaN
      0x7FF8000000000001ULL, 0x7FFFFFFFFFFFFFFFULL, 0x7FFC000000000000ULL,
      0x7FF0000000000001ULL,  // signalling, lowest payload bit only
      0x7FF0000000001000ULL, 0x7FF0000100000000ULL, 0x7FF4000000000000ULL,
      0x7FF0080000000000ULL, 0x7FF7FFFFFFFFFFFFULL, 0x7FF0000000000200ULL,
  };
  for (const uint64_t p : payloads) {
    for (const uint64_t sign : {uint64_t{0}, uint64_t{1} << 63}) {
      const double v = std::bit_cast<double>(p | sign);
      ASSERT_TRUE(std::isnan(v));
      expect_narrow(fmt, v, static_cast<uint16_t>(fmt.f.quiet_nan_bits() | (sign >> 48)), misses);
    }
  }
  // Widening a NaN and narrowing it again keeps it a NaN (checked for every pattern in
  // EveryPatternRoundTrips); here a float NaN made from a double quiet NaN widens back to NaN.
  EXPECT_TRUE(std::isnan(fmt.widen(fmt.narrow(std::numeric_limits<double>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(fmt.widen(fmt.narrow(std::numeric_limits<double>::signaling_NaN()))));
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfTest, ::testing::ValuesIn(kFormats),
                         [](const ::testing::TestParamInfo<Format>& param_info) {
                           return std::string(param_info.param.name);
                         });

}  // namespace
