// Floating CumProd against an independent exact-product reference, and its bits across kernel
// tables, thread counts, long-row splits, directions and layouts.
//
// The reference keeps the product as a binary128 mantissa in [1/2, 1) and an integer exponent,
// with the sign and the zero/infinity/NaN record apart: it never over- or underflows, and after
// 10^6 factors it is within 10^6 * 2^-113 < 2^-93 relative of the exact product. It shares no
// code with the kernels. The kernels' proven bound (src/kernels/prod.inc) for up to 10^6 terms is
// 1/2 ulp + 2^-9 ulp (float16, bfloat16, float32), 1/2 ulp + 2^-27 ulp (float64 normal results)
// and 3/4 ulp + 2^-28 ulp (float64 subnormal results); the checks allow 1/2 + 2^-9 and 0.76 ulp,
// inside the promised 1 ulp.
// CTest reruns this binary under each CUMULUS_ISA.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "cumulus/ops.h"
#include "exact_types.h"
#include "kernels/kernels.h"
#include "ops/tuning.h"
#include "reference.h"
#include "scoped.h"

namespace {

using cumulus::ConstTensorView;
using cumulus::DType;
using cumulus::ScanOptions;
using cumulus::TensorView;
using cumulus::detail::KernelTable;
using cumulus::detail::Tuning;
using Quad = ref::Quad;
using Shape = std::vector<int64_t>;
using Rng = std::mt19937_64;

// ---- The reference ------------------------------------------------------------------------------

struct Format {
  int precision;  // significand bits
  int emin;       // the smallest normal value is 2^emin
  int emax;       // the largest finite value is (2 - 2^(1 - precision)) 2^emax
};
template <class T>
constexpr Format kFormat = std::is_same_v<T, double>              ? Format{53, -1022, 1023}
                           : std::is_same_v<T, float>             ? Format{24, -126, 127}
                           : std::is_same_v<T, cumulus::BFloat16> ? Format{8, -126, 127}
                                                                  : Format{11, -14, 15};

Quad pow2q(int64_t k) {
  Quad p = 1;
  const Quad step = k > 0 ? Quad(0x1p512) : Quad(0x1p-512);
  for (; k > 512 || k<-512; k += k> 0 ? -512 : 512) p *= step;
  return p * static_cast<Quad>(std::ldexp(1.0, static_cast<int>(k)));
}

class ExactProduct {
 public:
  void mul(double x) {
    if (std::isnan(x)) {
      nan_ = true;
      return;
    }
    negative_ ^= std::signbit(x);
    if (x == 0) {
      zero_ = true;
    } else if (std::isinf(x)) {
      inf_ = true;
    } else {
      int k = 0;
      const double f = std::frexp(std::fabs(x), &k);  // exact: f in [1/2, 1)
      mant_ *= f;
      exp_ += k;
      if (mant_ < Quad(0.5)) {
        mant_ *= 2;
        exp_ -= 1;
      }
    }
  }

  // Empty when `got` is within `tol` ulps of the product (ulps of T at the product), and has its
  // IEEE class and sign; else what is wrong.
  template <class T>
  std::string check(T got, double tol_normal, double tol_subnormal) const {
    const double g = ref::Num<T>::to_double(got);
    const Format f = kFormat<T>;
    if (nan_ || (zero_ && inf_)) return std::isnan(g) ? "" : "expected NaN, got " + text(g);
    if (std::isnan(g)) return "expected a number, got NaN";
    if (std::signbit(g) != negative_) return "wrong sign: got " + text(g);
    if (inf_) return std::isinf(g) ? "" : "expected Inf, got " + text(g);
    if (zero_) return g == 0 ? "" : "expected 0, got " + text(g);
    // |product| = mant_ 2^exp_, in [2^(exp_ - 1), 2^exp_).
    if (exp_ - 1 > f.emax + 1) return std::isinf(g) ? "" : "expected Inf, got " + text(g);
    if (exp_ < f.emin - f.precision - 1) return g == 0 ? "" : "expected 0, got " + text(g);
    const int64_t ulp_exp = std::max<int64_t>(exp_ - 1, f.emin) - (f.precision - 1);
    const Quad exact = mant_ * pow2q(exp_ - ulp_exp);  // in ulps
    if (std::isinf(g)) {
      // Inf is right past max + 1/2 ulp: (2^p - 1/2) ulps of the top binade.
      const Quad threshold = pow2q(f.precision) - Quad(0.5);
      const bool top = exp_ - 1 >= f.emax;
      const Quad in_top = top ? mant_ * pow2q(exp_ - (f.emax - (f.precision - 1))) : 0;
      return top && in_top >= threshold - Quad(0x1p-20) ? "" : "overflowed to " + text(g);
    }
    const Quad mine = static_cast<Quad>(std::fabs(g)) * pow2q(-ulp_exp);
    const Quad err = mine > exact ? mine - exact : exact - mine;
    const double tol = exp_ - 1 >= f.emin ? tol_normal : tol_subnormal;
    if (err <= Quad(tol)) return "";
    return "got " + text(g) + ", " + std::to_string(static_cast<double>(err)) +
           " ulps from the exact product (allowed " + std::to_string(tol) + ")";
  }

 private:
  static std::string text(double d) { return ref::double_string(d); }
  Quad mant_ = 0.5;
  int64_t exp_ = 1;
  bool negative_ = false, zero_ = false, inf_ = false, nan_ = false;
};

// The allowed errors, in ulps: the proven bounds (see the top) with a margin.
constexpr double kTolNormal = 0.5 + 0x1p-9;
template <class T>
constexpr double kTolSubnormal = std::is_same_v<T, double> ? 0.76 : kTolNormal;

// Every output of a scan of `length` terms starting at `x` (stride `stride`) checked against the
// reference; returns the number of misses, reporting the first few.
template <class T>
int check_line(const T* x, const T* y, std::size_t length, std::size_t stride, ScanOptions o,
               const std::string& what) {
  ExactProduct p;
  int misses = 0;
  for (std::size_t s = 0; s < length; ++s) {
    const std::size_t i = (o.reverse ? length - 1 - s : s) * stride;
    const double term = ref::Num<T>::to_double(x[i]);
    if (!o.exclusive) p.mul(term);
    const std::string miss = p.check(y[i], kTolNormal, kTolSubnormal<T>);
    if (o.exclusive) p.mul(term);
    if (!miss.empty() && ++misses <= 3) ADD_FAILURE() << what << ", output " << s << ": " << miss;
  }
  return misses;
}

// ---- Running the library ------------------------------------------------------------------------

using cumulus::testing::ScopedThreads;
using cumulus::testing::ScopedTuning;

template <class T>
std::vector<T> cumprod_along(const std::vector<T>& x, const Shape& shape, int64_t axis,
                             ScanOptions o, bool in_place = false) {
  constexpr DType kType = cumulus::dtype_of<T>;
  std::vector<T> y = x;
  cumulus::cumprod(ConstTensorView(kType, shape, in_place ? y.data() : x.data()), axis,
                   TensorView{kType, shape, y.data()}, o);
  return y;
}
template <class T>
std::vector<T> cumprod(const std::vector<T>& x, const Shape& shape, ScanOptions o,
                       bool in_place = false) {
  return cumprod_along(x, shape, 0, o, in_place);
}

// The kernel tables this CPU can run.
std::vector<const KernelTable*> tables() { return exact_test::kernel_tables(); }

constexpr ScanOptions kModes[] = {{false, false}, {true, false}, {false, true}, {true, true}};
std::string mode_name(ScanOptions o) {
  return std::string(o.exclusive ? "exclusive" : "inclusive") + (o.reverse ? " reverse" : "");
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// ---- Data ---------------------------------------------------------------------------------------

double uniform(Rng& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1p-53;
}
template <class T>
T rounded(double d) {
  return ref::Num<T>::from_double_rounded(d);
}
// A random significand in [1, 2) with a random sign, at T's precision.
template <class T>
double mantissa(Rng& rng) {
  const double m = ref::Num<T>::to_double(rounded<T>(uniform(rng, 1, 2)));
  return rng() % 2 != 0 ? -m : m;
}

enum class Pattern {
  kNearOne,
  kExcursions,
  kSubnormals,
  kSpecials,
  kModerateWalk,
  kWideWalk,
  kBinadeRuns
};
const char* pattern_name(Pattern p) {
  return p == Pattern::kNearOne        ? "near one"
         : p == Pattern::kExcursions   ? "excursions"
         : p == Pattern::kSubnormals   ? "subnormals"
         : p == Pattern::kSpecials     ? "specials"
         : p == Pattern::kModerateWalk ? "moderate walk"
         : p == Pattern::kWideWalk     ? "wide walk"
                                       : "binade runs";
}

// kNearOne: factors 1 +- up to 2^-4, signs random: long products that drift slowly.
// kExcursions: runs of the largest binade's factors then of the smallest normal binade's, so the
// prefixes leave T's range (and double's) and come back; float64 1e300 1e300 1e-300 1e-300.
// kSubnormals: T's subnormal factors among large ones, the product returning to range.
// kSpecials: near one, with +-0, +-Inf and NaN here and there.
// kModerateWalk: factors of magnitudes within [2^-60, 2^60] and T's normal range, among them
// +-2^60 and +-2^-60 exactly, whose product walks up past 2^800 and down past 2^-800 and back,
// through T's range each way: long products far beyond double's range from factors of modest size.
// kWideWalk: the same walk between 2^-16000 and 2^16000 with factors from T's whole normal range,
// most of them large: runs of hundreds of factors each way (so the vector kernels' groups lie
// inside one), and blocks of eight that start far outside T's range and end inside it.
// kBinadeRuns: runs of factors from the binades [s/2, s] of one run's s (2, 13 or 24, within T's
// range; runs of 13 and 24 long), among them +-2^14 and +-2^-14 exactly (bounds of the kind a
// vector kernel tests before it multiplies terms unsplit) and the nearest values outside them,
// whose product turns at random points between 2^900 and 2^2300, then between 2^-900 and
// 2^-2300: groups of 64 in [2^-14, 2^14] that start at every distance from T's range and double's,
// whose products lift their outputs from far below the subnormal range into it, or bring them from
// far above back into range.
template <class T>
std::vector<T> make_terms(Pattern pattern, Rng& rng, std::size_t n) {
  const Format f = kFormat<T>;
  std::vector<T> v(n);
  int pending = 0;       // kSubnormals: the binades to climb back
  int walk = 0, up = 1;  // the walks: the product's binade, roughly, and where it heads
  int run = 0, top = 2;  // kBinadeRuns: the factors left in this run, its largest binade,
  int turn = 1000;       // where the product turns next, and its binade (log2 of it)
  double level = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double d = 1 + uniform(rng, -0x1p-4, 0x1p-4);
    if (rng() % 2 != 0) d = -d;
    switch (pattern) {
      case Pattern::kNearOne:
        break;
      case Pattern::kExcursions: {
        const std::size_t phase = i % 19;
        if constexpr (std::is_same_v<T, double>) {
          d = phase < 2 ? 1e300 : phase < 4 ? 1e-300 : phase < 8 ? 1e300 : phase < 12 ? 1e-300 : d;
        } else {
          // Nine up, nine down, then one that takes the nineteen bits their significands added.
          const double m = mantissa<T>(rng);
          d = phase < 9 ? std::ldexp(m, f.emax) : phase < 18 ? std::ldexp(m, f.emin) : d / 0x1p19;
        }
        break;
      }
      case Pattern::kSubnormals: {
        // A subnormal, then two large factors that bring the product back near 1.
        const std::size_t phase = i % 4;
        if (phase == 0) {
          const int below = static_cast<int>(rng() % static_cast<unsigned>(f.precision - 1)) + 1;
          d = mantissa<T>(rng) * std::ldexp(1.0, f.emin - below);
          pending = below - f.emin;
        }
        if (phase == 1) d = std::ldexp(mantissa<T>(rng), pending / 2);
        if (phase == 2) d = std::ldexp(mantissa<T>(rng), pending - pending / 2 - 1);
        break;
      }
      case Pattern::kModerateWalk:
      case Pattern::kWideWalk: {
        const bool wide = pattern == Pattern::kWideWalk;
        const int step = std::min({wide ? 1 << 20 : 60, f.emax, -f.emin});
        const int bound = wide ? 16000 : 800;
        if (walk > bound) up = -1;
        if (walk < -bound) up = 1;
        const bool end = rng() % 16 == 0;  // a factor at the end of the range
        const auto least = static_cast<unsigned>(wide ? step / 2 : 1);
        const int k =
            up *
            (end ? step
                 : static_cast<int>(least + rng() % (static_cast<unsigned>(step) - least + 1)));
        walk += k;
        d = std::ldexp(end ? (rng() % 2 != 0 ? -1.0 : 1.0) : mantissa<T>(rng), k);
        break;
      }
      case Pattern::kBinadeRuns: {
        if (run-- == 0) {
          constexpr int kTops[] = {2, 13, 13, 24};
          const int s = kTops[rng() % 4];
          top = std::min({s, f.emax, -f.emin});
          // Long runs of large binades, inside the moderate bounds and beyond, so that groups of
          // 64 lie inside them.
          run = s == 2 ? 16 + static_cast<int>(rng() % 48) : 64 + static_cast<int>(rng() % 192);
        }
        // The product turns where it passes a turning point drawn anew each time.
        if (up > 0 && level > turn) {
          up = -1;
          turn = -900 - static_cast<int>(rng() % 1400);
        } else if (up < 0 && level < turn) {
          up = 1;
          turn = 900 + static_cast<int>(rng() % 1400);
        }
        const uint64_t r = rng() % 256;  // rare enough that most groups of 64 have neither
        const int bound = std::min({14, f.emax, -f.emin});
        const double sign = rng() % 2 != 0 ? -1.0 : 1.0;
        if (r < 2) {  // the bound itself, or the nearest value outside it
          const double outside =
              up > 0 ? 1 + std::ldexp(1.0, 1 - f.precision) : 1 - std::ldexp(1.0, -f.precision);
          d = sign * std::ldexp(r == 0 ? 1.0 : outside, up * bound);
        } else {
          const int k =
              top / 2 + static_cast<int>(rng() % static_cast<unsigned>(top - top / 2 + 1));
          d = std::ldexp(mantissa<T>(rng), up * k);
        }
        level += std::log2(std::fabs(d));
        break;
      }
      case Pattern::kSpecials: {
        const uint64_t r = rng() % 4096;
        if (r == 0) d = 0.0;
        if (r == 1) d = -0.0;
        if (r == 2) d = INFINITY;
        if (r == 3) d = -INFINITY;
        if (r == 4) d = NAN;
        break;
      }
    }
    v[i] = rounded<T>(d);
  }
  return v;
}

template <class T>
class ExactProd : public ::testing::Test {};
using Types = ::testing::Types<float, double, cumulus::Float16, cumulus::BFloat16>;
class TypeNames {
 public:
  template <class T>
  static std::string GetName(int) {
    return std::string(cumulus::dtype_name(cumulus::dtype_of<T>));
  }
};
TYPED_TEST_SUITE(ExactProd, Types, TypeNames);

constexpr Pattern kPatterns[] = {Pattern::kNearOne,   Pattern::kExcursions,   Pattern::kSubnormals,
                                 Pattern::kSpecials,  Pattern::kModerateWalk, Pattern::kWideWalk,
                                 Pattern::kBinadeRuns};

// Every output of rows longer than several spans within the bound, every direction.
TYPED_TEST(ExactProd, RowsWithinTheBound) {
  using T = TypeParam;
  Rng rng(20261201);
  for (Pattern pattern : kPatterns) {
    const std::vector<T> x = make_terms<T>(pattern, rng, 3 * cumulus::detail::kProductSpan + 1001);
    for (ScanOptions o : kModes) {
      const std::vector<T> y = cumprod(x, {static_cast<int64_t>(x.size())}, o);
      const std::string what = std::string(pattern_name(pattern)) + ", " + mode_name(o);
      EXPECT_EQ(check_line(x.data(), y.data(), x.size(), 1, o, what), 0) << what;
    }
  }
}

// Columns: each along the outer axis, with the column tiles the ops layer cuts.
TYPED_TEST(ExactProd, ColumnsWithinTheBound) {
  using T = TypeParam;
  Rng rng(7);
  constexpr std::size_t kLength = 5000, kColumns = 13;
  Tuning t;
  t.column_tile = 5;
  const ScopedTuning tuning(t);
  for (Pattern pattern : kPatterns) {
    const std::vector<T> x = make_terms<T>(pattern, rng, kLength * kColumns);
    for (ScanOptions o : kModes) {
      const std::vector<T> y = cumprod(x, {kLength, kColumns}, o);
      for (std::size_t c = 0; c < kColumns; ++c) {
        const std::string what = std::string(pattern_name(pattern)) + ", " + mode_name(o) +
                                 ", column " + std::to_string(c);
        EXPECT_EQ(check_line(x.data() + c, y.data() + c, kLength, kColumns, o, what), 0) << what;
      }
    }
  }
}

// IEEE rules in short rows: 0 * Inf is NaN, a zero's sign is the XOR of the terms' signs.
TYPED_TEST(ExactProd, ZerosInfinitiesAndNaN) {
  using T = TypeParam;
  const std::vector<std::vector<double>> rows = {
      {2, -0.0, 3, -1, INFINITY, 5}, {-0.0, -0.0, -2, 0.5},
      {INFINITY, -2, -INFINITY, 0},  {NAN, 1, 2, 3},
      {3, -INFINITY, 2, NAN, 4},     {0.0, 0.0, -1, -1, -1}};
  for (const auto& row : rows) {
    std::vector<T> x;
    for (double d : row) x.push_back(rounded<T>(d));
    for (ScanOptions o : kModes) {
      const std::vector<T> y = cumprod(x, {static_cast<int64_t>(x.size())}, o);
      EXPECT_EQ(check_line(x.data(), y.data(), x.size(), 1, o, mode_name(o)), 0);
    }
  }
}

// 10^6 factors: the bound holds at the promise's length, a row and columns.
template <class T>
void check_million_terms() {
  Rng rng(1000000);
  constexpr std::size_t kTerms = 1000000;
  for (Pattern pattern : {Pattern::kNearOne, Pattern::kExcursions}) {
    const std::vector<T> x = make_terms<T>(pattern, rng, kTerms);
    const ScanOptions o{};
    const std::vector<T> y = cumprod(x, {kTerms}, o);
    EXPECT_EQ(check_line(x.data(), y.data(), kTerms, 1, o, pattern_name(pattern)), 0);
    const std::vector<T> col = cumprod(x, {kTerms / 2, 2}, {false, true});
    EXPECT_EQ(check_line(x.data(), col.data(), kTerms / 2, 2, {false, true}, "column"), 0);
  }
}
// A float64 product that sinks slowly from 2^-1000 through the subnormals to zero: factors just
// below 1, whose significands near 2 make the vector kernels' unnormalised block mantissas large
// (towards 2^64), so outputs there are subnormal with exponents far below -1074, and further on
// round to zero.
TEST(ExactProdLong, Float64SinksThroughSubnormals) {
  Rng rng(1075);
  std::vector<double> x(60000);
  x[0] = 0x1p-1000;
  for (std::size_t i = 1; i < x.size(); ++i) {
    x[i] = (rng() % 2 != 0 ? -1 : 1) * (0.999 + static_cast<double>(rng() % 1024) * 0x1p-20);
  }
  for (ScanOptions o : kModes) {
    const std::vector<double> y = cumprod(x, {static_cast<int64_t>(x.size())}, o);
    EXPECT_EQ(check_line(x.data(), y.data(), x.size(), 1, o, mode_name(o)), 0);
  }
}

// float64 spans whose terms lie in [2^-60, 2^61), which the vector tables scan without splitting
// them: products that sink far below double's range (factors 2^-20 to 2^-1, the outputs below
// 2^-1076 after the first spans: zeros, whole spans of them signs alone), that walk between 2^-3000
// and 2^3000 (every distance from the range), and that stay near 1 (each output one exact scaling);
// the same bits from every table and thread count as the scalar table's, within the bound.
TEST(ExactProdLong, Float64ModerateSpansEveryWay) {
  Rng rng(61);
  constexpr std::size_t kN = 5 * cumulus::detail::kProductSpan + 333;
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<double> x(kN);
    int level = 0, up = -1;
    for (std::size_t i = 0; i < kN; ++i) {
      const double sign = rng() % 2 != 0 ? -1 : 1;
      if (kind == 2) {
        x[i] = sign * uniform(rng, 0.97, 1.03);
        continue;
      }
      const int k =
          kind == 0 ? -1 - static_cast<int>(rng() % 20) : up * static_cast<int>(rng() % 25);
      level += k;
      if (level < -3000) up = 1;
      if (level > 3000) up = -1;
      x[i] = sign * std::ldexp(uniform(rng, 1, 2), k);
    }
    const Shape row = {static_cast<int64_t>(kN)};
    for (ScanOptions o : kModes) {
      Tuning base;
      base.table = &cumulus::detail::scalar_kernels();
      std::vector<double> want;
      {
        const ScopedTuning s(base);
        const ScopedThreads one(1);
        want = cumprod(x, row, o);
      }
      const std::string what = "kind " + std::to_string(kind) + ", " + mode_name(o);
      EXPECT_EQ(check_line(x.data(), want.data(), kN, 1, o, what), 0) << what;
      for (const KernelTable* table : tables()) {
        for (int threads : {1, 2, 3}) {
          Tuning t;
          t.table = table;
          const ScopedTuning s(t);
          const ScopedThreads th(threads);
          EXPECT_TRUE(same_bits(cumprod(x, row, o), want))
              << what << ", " << table->isa << ", " << threads << " threads";
        }
      }
    }
  }
}

TEST(ExactProdLong, Float32MillionTerms) { check_million_terms<float>(); }
TEST(ExactProdLong, Float64MillionTerms) { check_million_terms<double>(); }

// A piece's total and the combine of two, at their full precision (the outputs' last rounding
// hides most differences of order): the same bits from every kernel table.
TYPED_TEST(ExactProd, TotalsIdenticalAcrossTables) {
  using T = TypeParam;
  Rng rng(5);
  const auto d = static_cast<int>(cumulus::dtype_of<T>);
  for (Pattern pattern : kPatterns) {
    const std::vector<T> x = make_terms<T>(pattern, rng, 2 * cumulus::detail::kProductSpan);
    const auto& scalar = cumulus::detail::scalar_kernels().cumprod[d];
    const auto bits = [](const cumulus::detail::Carry& c) {
      const auto& p = c.prod;
      return std::vector<uint64_t>{std::bit_cast<uint64_t>(p.hi), std::bit_cast<uint64_t>(p.lo),
                                   std::bit_cast<uint64_t>(p.q), static_cast<uint64_t>(p.exp)};
    };
    const std::size_t half = x.size() / 2;
    const auto a = scalar.total(x.data(), half);
    const auto b = scalar.total(x.data() + half, x.size() - half);
    for (const KernelTable* table : tables()) {
      const auto& k = table->cumprod[d];
      EXPECT_EQ(bits(k.total(x.data(), half)), bits(a)) << pattern_name(pattern) << table->isa;
      EXPECT_EQ(bits(k.combine(a, b)), bits(scalar.combine(a, b))) << table->isa;
      // A span with a tail (a row's last): fewer than 64 terms after its regions, or only those.
      for (const std::size_t n :
           {std::size_t{5}, std::size_t{63}, std::size_t{100}, std::size_t{255}, std::size_t{1000},
            cumulus::detail::kProductSpan + 45}) {
        EXPECT_EQ(bits(k.total(x.data(), n)), bits(scalar.total(x.data(), n)))
            << pattern_name(pattern) << table->isa << " [" << n << "]";
      }
    }
  }
}

// The ops layer takes floating CumProd's totals span by span, whatever the tuning's piece (one
// span, or several in one piece) and whether a long row is scanned in place (pieces in rounds) or
// not (a segment per thread): the span is the kernels' evaluation order. A table that records the
// lengths its total() is asked for sees the cut. On several threads a row goes in chained pieces
// (ChainedScan) whose kernel forms the totals itself: none are asked for.
std::mutex g_total_mutex;
std::vector<std::size_t> g_total_lengths;
cumulus::detail::Carry recording_total(const void* x, std::size_t n) noexcept {
  {
    const std::lock_guard lock(g_total_mutex);
    g_total_lengths.push_back(n);
  }
  return cumulus::detail::scalar_kernels().cumprod[static_cast<int>(DType::kFloat32)].total(x, n);
}
TEST(ExactProdPieces, LongRowsAreCutIntoSpans) {
  constexpr std::size_t kSpan = cumulus::detail::kProductSpan;
  KernelTable recording = cumulus::detail::scalar_kernels();
  recording.cumprod[static_cast<int>(DType::kFloat32)].total = &recording_total;
  Rng rng(3);
  for (const bool in_place : {true, false}) {
    // In place, one thread totals every span of the row; else three threads chain its pieces.
    const std::size_t spans = in_place ? 3 : 12;
    const std::vector<float> x = make_terms<float>(Pattern::kNearOne, rng, spans * kSpan + 5);
    const Shape row = {static_cast<int64_t>(x.size())};
    for (std::size_t piece : {std::size_t{37}, 2 * kSpan + 1}) {
      Tuning t;
      t.long_row = 1;
      t.piece = piece;
      t.pieces_per_round = 2;
      t.table = &recording;
      g_total_lengths.clear();
      ScanOptions o;
      o.reverse = !in_place;
      std::vector<float> split;
      {
        const ScopedTuning s(t);
        const ScopedThreads threads(in_place ? 1 : 3);
        split = cumprod(x, row, o, in_place);
      }
      if (in_place) {
        EXPECT_EQ(g_total_lengths, (std::vector<std::size_t>{kSpan, kSpan, kSpan, 5})) << piece;
      } else {
        EXPECT_TRUE(g_total_lengths.empty()) << piece;
      }
      Tuning whole;
      whole.table = &cumulus::detail::scalar_kernels();
      const ScopedTuning s(whole);
      EXPECT_TRUE(same_bits(split, cumprod(x, row, o))) << piece << " in place " << in_place;
    }
  }
}

// The same bits from every kernel table, thread count and long-row split, for every direction;
// in place too.
TYPED_TEST(ExactProd, BitsIdenticalEverywhere) {
  using T = TypeParam;
  Rng rng(99);
  constexpr std::size_t kSpan = cumulus::detail::kProductSpan;
  Tuning split;  // one-piece rounds
  split.long_row = 1;
  split.pieces_per_round = 1;
  Tuning rounds;  // several pieces a round, tiny tuning pieces (floating CumProd keeps its span)
  rounds.long_row = 2 * kSpan;
  rounds.piece = 37;
  rounds.pieces_per_round = 3;
  rounds.min_chunk_elements = 1;
  Tuning columns;
  columns.column_tile = 3;
  columns.min_chunk_elements = 1;
  Tuning spans;  // pieces of two spans (the tuning's piece rounded down), two a round, streamed
  spans.long_row = 1;
  spans.piece = 2 * kSpan + 37;
  spans.pieces_per_round = 2;
  spans.stream_bytes = 1;
  spans.stream_every_row = true;
  const Tuning tunings[] = {Tuning{}, split, rounds, columns, spans};
  for (Pattern pattern : kPatterns) {
    const std::vector<T> x = make_terms<T>(pattern, rng, 5 * kSpan + 333);
    const Shape row = {static_cast<int64_t>(x.size())};
    const Shape cols = {static_cast<int64_t>(x.size() / 3), 3};
    for (ScanOptions o : kModes) {
      Tuning base;
      base.table = &cumulus::detail::scalar_kernels();
      std::vector<T> want_row, want_cols;
      {
        const ScopedTuning s(base);
        const ScopedThreads one(1);
        want_row = cumprod(x, row, o);
        want_cols = cumprod(x, cols, o);
      }
      int differences = 0;
      for (const KernelTable* table : tables()) {
        for (int threads : {1, 2, 3, 8}) {
          for (std::size_t k = 0; k < std::size(tunings); ++k) {
            Tuning t = tunings[k];
            t.table = table;
            const ScopedTuning s(t);
            const ScopedThreads th(threads);
            const std::string what = std::string(pattern_name(pattern)) + ", " + mode_name(o) +
                                     ", " + table->isa + ", " + std::to_string(threads) +
                                     " threads, tuning " + std::to_string(k);
            const bool in_place = threads == 3;
            if (!same_bits(cumprod(x, row, o, in_place), want_row) && ++differences <= 5) {
              ADD_FAILURE() << "row: " << what;
            }
            if (!same_bits(cumprod(x, cols, o, in_place), want_cols) && ++differences <= 5) {
              ADD_FAILURE() << "columns: " << what;
            }
          }
        }
      }
      EXPECT_EQ(differences, 0);
    }
  }
}

// Rows shorter than a span (float16, bfloat16 and float32 take them in vectors of eight, a tree
// within each, prod.inc's short rows; float64 those shorter than 128 terms): every length from 1
// to 40 and around the vector, renormalisation and short-row steps, every pattern, a table of such
// rows too, and rows that pile a product far beyond double's range onto eight terms whose own
// product lies below double's normal range (the row's outputs normal again) or beyond it. Within
// the bound, and the scalar table's bits from every table, thread count and tuning that reaches the
// row kernels or the chained pieces.
TYPED_TEST(ExactProd, ShortRowsEveryWay) {
  using T = TypeParam;
  const Format f = kFormat<T>;
  constexpr std::size_t kSpan = cumulus::detail::kProductSpan;
  Rng rng(1207);
  std::vector<std::size_t> lengths;
  for (std::size_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (std::size_t n : {63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 263, 1000, 2047, 2048, 2049})
    lengths.push_back(n);
  lengths.push_back(kSpan - 1);
  Tuning split;  // a long row: the chained pieces on two threads or more, else a segment's scan
  split.long_row = 1;
  Tuning columns;  // a table of rows split among the threads row by row
  columns.min_chunk_elements = 1;
  const Tuning tunings[] = {Tuning{}, split, columns};
  struct Way {
    int threads;
    std::size_t tuning;
    bool in_place;
  };
  constexpr Way kWays[] = {{1, 0, false}, {2, 0, true}, {1, 1, false},
                           {2, 1, false}, {3, 1, true}, {2, 2, false}};
  std::vector<std::vector<T>> rows;
  for (Pattern pattern : kPatterns) {
    for (std::size_t n : lengths) rows.push_back(make_terms<T>(pattern, rng, n));
  }
  // Eight terms whose product lies near 2^-1070, deep in double's subnormals where T's range
  // reaches (float32; bfloat16's subnormals, 2^-1064; float16's least, 2^-192), after a product
  // near 2^964 (so their outputs are normal doubles), or more beyond double's range; and eight
  // terms up to 2^127 after a product near 2^-964.
  for (int up : {1, -1}) {
    const double big = std::ldexp(1.5, up * std::min(f.emax, 120));
    const int least = f.emin - (f.precision - 1);  // T's least subnormal's exponent
    const double small =
        up > 0 ? std::ldexp(1.0, std::max(-134, least)) : std::ldexp(1.0, std::min(f.emax, 126));
    for (std::size_t lead : {8, 16, 24, 40}) {
      std::vector<T> x;
      for (std::size_t i = 0; i < lead; ++i) x.push_back(rounded<T>(big));
      for (int i = 0; i < 8; ++i) x.push_back(rounded<T>(small * (1 + i / 16.0)));
      for (int i = 0; i < 11; ++i) x.push_back(rounded<T>(1.0625 - i / 64.0));
      rows.push_back(x);
    }
  }
  // Each row, and a table of three: x, x reversed, x negated.
  struct Case {
    std::vector<T> row, table;
    Shape row_shape, table_shape;
    std::vector<T> want_row[std::size(kModes)], want_table[std::size(kModes)];
  };
  std::vector<Case> cases;
  for (const std::vector<T>& x : rows) {
    const std::size_t n = x.size();
    Case c{x, {}, {static_cast<int64_t>(n)}, {3, static_cast<int64_t>(n)}, {}, {}};
    for (int r = 0; r < 3; ++r) {
      for (std::size_t i = 0; i < n; ++i) {
        const T t = x[r == 1 ? n - 1 - i : i];
        c.table.push_back(r == 2 ? rounded<T>(-ref::Num<T>::to_double(t)) : t);
      }
    }
    cases.push_back(std::move(c));
  }
  {
    Tuning base;
    base.table = &cumulus::detail::scalar_kernels();
    const ScopedTuning s(base);
    const ScopedThreads one(1);
    for (Case& c : cases) {
      const std::size_t n = c.row.size();
      for (std::size_t m = 0; m < std::size(kModes); ++m) {
        const ScanOptions o = kModes[m];
        c.want_row[m] = cumprod_along(c.row, c.row_shape, 0, o);
        c.want_table[m] = cumprod_along(c.table, c.table_shape, 1, o);
        const std::string what = "length " + std::to_string(n) + ", " + mode_name(o);
        ASSERT_EQ(check_line(c.row.data(), c.want_row[m].data(), n, 1, o, what), 0) << what;
        for (std::size_t r = 0; r < 3; ++r) {
          ASSERT_EQ(
              check_line(c.table.data() + r * n, c.want_table[m].data() + r * n, n, 1, o, what), 0)
              << what << ", table row " << r;
        }
      }
    }
  }
  for (const KernelTable* table : tables()) {
    for (const auto [threads, k, in_place] : kWays) {
      Tuning t = tunings[k];
      t.table = table;
      const ScopedTuning s(t);
      const ScopedThreads th(threads);
      for (const Case& c : cases) {
        for (std::size_t m = 0; m < std::size(kModes); ++m) {
          const ScanOptions o = kModes[m];
          const std::string where = "length " + std::to_string(c.row.size()) + ", " + mode_name(o) +
                                    ", " + table->isa + ", " + std::to_string(threads) +
                                    " threads, tuning " + std::to_string(k) +
                                    (in_place ? ", in place" : "");
          ASSERT_TRUE(same_bits(cumprod_along(c.row, c.row_shape, 0, o, in_place), c.want_row[m]))
              << "row: " << where;
          ASSERT_TRUE(
              same_bits(cumprod_along(c.table, c.table_shape, 1, o, in_place), c.want_table[m]))
              << "table: " << where;
        }
      }
    }
  }
}

// A long row not in place goes a segment per thread, each thread folding the previous segment's
// span totals into the carry the thread before it publishes (a list of them where that carry comes
// later). Rows of 40 spans, so segments after the first hold several spans whatever the cut
// (pieces of 8 spans, the default, or of 2): the same bits as one thread.
TYPED_TEST(ExactProd, SegmentsPerThreadFoldSpansInOrder) {
  using T = TypeParam;
  Rng rng(41);
  constexpr std::size_t kSpan = cumulus::detail::kProductSpan;
  Tuning pieces8;
  pieces8.long_row = 1;
  Tuning pieces2;
  pieces2.long_row = 1;
  pieces2.piece = 2 * kSpan;
  const std::vector<T> x = make_terms<T>(Pattern::kExcursions, rng, 40 * kSpan + 333);
  const Shape row = {static_cast<int64_t>(x.size())};
  for (ScanOptions o : {ScanOptions{false, false}, ScanOptions{true, true}}) {
    std::vector<T> want;
    {
      const ScopedThreads one(1);
      want = cumprod(x, row, o);
    }
    for (Tuning t : {pieces8, pieces2}) {
      for (int threads : {2, 3, 4, 8}) {
        const ScopedTuning s(t);
        const ScopedThreads th(threads);
        EXPECT_TRUE(same_bits(cumprod(x, row, o), want))
            << mode_name(o) << ", piece " << t.piece << ", " << threads << " threads";
      }
    }
  }
}

// Long random rows and columns (every significand bit random, exponents spread, a rare zero, or
// infinities and negative zeros) from every vector table, and their totals, bit for bit against the
// scalar table, whose block loop is the reference evaluation order the vector kernels must
// reproduce; every direction.
TYPED_TEST(ExactProd, VectorTablesMatchScalarOnRandomData) {
  using T = TypeParam;
  Rng rng(4242);
  constexpr std::size_t kN = 7 * cumulus::detail::kProductSpan + 517;
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<T> x(kN);
    for (std::size_t i = 0; i < kN; ++i) {
      double d = std::ldexp(mantissa<T>(rng), static_cast<int>(rng() % 7) - 3);
      if (kind == 1 && rng() % 5000 == 0) d = 0.0;
      if (kind == 2 && i % 4999 == 17) d = i / 4999 % 2 != 0 ? INFINITY : -0.0;
      x[i] = rounded<T>(d);
    }
    // The total at full precision: the outputs' rounding to a narrow type hides most slips.
    const auto dt = static_cast<int>(cumulus::dtype_of<T>);
    const auto want = cumulus::detail::scalar_kernels().cumprod[dt].total(x.data(), kN).prod;
    for (const KernelTable* table : tables()) {
      const auto got = table->cumprod[dt].total(x.data(), kN).prod;
      EXPECT_TRUE(std::bit_cast<uint64_t>(got.hi) == std::bit_cast<uint64_t>(want.hi) &&
                  std::bit_cast<uint64_t>(got.lo) == std::bit_cast<uint64_t>(want.lo) &&
                  std::bit_cast<uint64_t>(got.q) == std::bit_cast<uint64_t>(want.q) &&
                  got.exp == want.exp)
          << "total: kind " << kind << ", " << table->isa;
    }
    const Shape row = {static_cast<int64_t>(kN)};
    const Shape cols = {static_cast<int64_t>(kN / 11), 11};
    for (ScanOptions o : kModes) {
      Tuning base;
      base.table = &cumulus::detail::scalar_kernels();
      std::vector<T> want_row, want_cols;
      {
        const ScopedTuning s(base);
        want_row = cumprod(x, row, o);
        want_cols = cumprod(x, cols, o);
      }
      for (const KernelTable* table : tables()) {
        Tuning t;
        t.table = table;
        const ScopedTuning s(t);
        const std::string what =
            "kind " + std::to_string(kind) + ", " + mode_name(o) + ", " + table->isa;
        EXPECT_TRUE(same_bits(cumprod(x, row, o), want_row)) << "row: " << what;
        EXPECT_TRUE(same_bits(cumprod(x, cols, o), want_cols)) << "columns: " << what;
      }
    }
  }
}

}  // namespace
