// The operators give the same bits whatever floating-point environment their caller runs in:
// flush-to-zero and denormals-are-zero (PyTorch's set_flush_denormal, -ffast-math's startup code)
// and every rounding mode, on every kernel table, on one thread and on the pool's (whose workers
// are made while the caller's modes are set), and they hand the caller's modes back. CumSum and Sum
// against the independent exact::Sum (exact.h), computed in the default environment before the
// caller's is set; CumProd and the chunked scan against their own results in the default one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cumulus/chunks.h"
#include "cumulus/ops.h"
#include "exact.h"
#include "exact_types.h"
#include "ops/tuning.h"
#include "scoped.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>

namespace {

using cumulus::BFloat16;
using cumulus::ConstTensorView;
using cumulus::Float16;
using cumulus::OpKind;
using cumulus::ScanOptions;
using cumulus::ScanState;
using cumulus::Tensor;
using cumulus::TensorView;
using cumulus::detail::KernelTable;
using cumulus::detail::Tuning;
using cumulus::testing::ScopedThreads;
using cumulus::testing::ScopedTuning;
using exact_test::bits;
using exact_test::kFormat;
using exact_test::of;
using exact_test::value;
using Shape = std::vector<int64_t>;

// MXCSR's control bits: denormals-are-zero (6), the rounding mode (13-14), flush-to-zero (15).
constexpr unsigned kDenormalsAreZero = 0x0040, kFlushToZero = 0x8000;
constexpr unsigned kTowardZero = 0x6000, kUpward = 0x4000, kDownward = 0x2000;
constexpr unsigned kFlags = 0x3f;

struct Mode {
  unsigned bits;
  const char* name;
};
constexpr Mode kModes[] = {
    {kFlushToZero | kDenormalsAreZero, "flush-to-zero and denormals-are-zero"},
    {kTowardZero, "toward zero"},
    {kUpward, "upward"},
    {kDownward, "downward"},
    {kFlushToZero | kDenormalsAreZero | kUpward, "flush, denormals-are-zero and upward"},
};

// The caller's modes for one scope: the default's control bits with `mode` set.
class CallerModes {
 public:
  explicit CallerModes(unsigned mode) : saved_(_mm_getcsr()) {
    _mm_setcsr((0x1f80 | mode) | (saved_ & kFlags));
  }
  ~CallerModes() { _mm_setcsr(saved_); }
  CallerModes(const CallerModes&) = delete;
  CallerModes& operator=(const CallerModes&) = delete;

 private:
  unsigned saved_;
};

unsigned control_bits() { return _mm_getcsr() & ~kFlags; }

// Terms that the caller's modes would change: subnormals of T (the first 16, then a quarter), of
// float (where T is wider), terms of ordinary size whose sums round; either sign.
template <class T>
std::vector<T> terms(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.5, 1.0);
  std::uniform_int_distribution<int> kind(0, 3), sign(0, 1);
  const exact::Format f = kFormat<T>;
  std::vector<T> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    double d = unit(rng);
    // The first terms all subnormals of T, so that the sums begin among them.
    switch (i < 16 ? 0 : kind(rng)) {
      case 0:  // a subnormal of T
        d = std::ldexp(d, f.emin - 1 - std::uniform_int_distribution<int>(0, f.precision - 2)(rng));
        break;
      case 1:  // a float subnormal, for the wider types
        d = std::ldexp(d, -127 - std::uniform_int_distribution<int>(0, 20)(rng));
        break;
      case 2:
        d = std::ldexp(d, std::uniform_int_distribution<int>(-8, 8)(rng));
        break;
      default:
        break;
    }
    x[i] = of<T>(sign(rng) != 0 ? -d : d);
  }
  return x;
}

// The exact prefix sums of x, rounded once to T, as bits.
template <class T>
std::vector<uint64_t> exact_prefix(const std::vector<T>& x) {
  std::vector<uint64_t> want(x.size());
  exact::Sum sum;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sum.add(value(x[i]));
    want[i] = sum.round_bits(kFormat<T>);
  }
  return want;
}

template <class T>
std::vector<uint64_t> bits_of(const T* p, std::size_t n) {
  std::vector<uint64_t> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = bits(p[i]);
  return b;
}

// The index of the first output that differs, or -1.
int64_t first_difference(const std::vector<uint64_t>& got, const std::vector<uint64_t>& want) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

struct Results {
  std::vector<uint64_t> cumsum, cumprod, sum, chunked;
  unsigned control_after = 0;  // the control bits when the calls have returned
};

// CumSum, CumProd, a Sum of x and two rotations of it, and a CumSum of x in two chunks.
template <class T>
Results run_all(const std::vector<T>& x) {
  constexpr auto kType = cumulus::dtype_of<T>;
  const std::size_t n = x.size();
  const Shape shape{static_cast<int64_t>(n)};
  std::vector<T> b(n), c(n);
  for (std::size_t i = 0; i < n; ++i) {
    b[i] = x[(i + 1) % n];
    c[i] = x[(i + 7) % n];
  }
  const ConstTensorView xv(kType, shape, x.data());
  Results r;
  const Tensor s = cumulus::cumsum(xv, 0);
  r.cumsum = bits_of(s.data<T>(), n);
  const Tensor p = cumulus::cumprod(xv, 0);
  r.cumprod = bits_of(p.data<T>(), n);
  const ConstTensorView inputs[] = {xv, ConstTensorView(kType, shape, b.data()),
                                    ConstTensorView(kType, shape, c.data())};
  const Tensor total = cumulus::sum(inputs);
  r.sum = bits_of(total.data<T>(), n);
  std::vector<T> y(n);
  ScanState state(OpKind::kCumSum, kType, {});
  const std::size_t half = n / 2;
  for (const auto& [from, to] : {std::pair{std::size_t{0}, half}, std::pair{half, n}}) {
    const Shape part{static_cast<int64_t>(to - from)};
    cumulus::scan_chunk(OpKind::kCumSum, ConstTensorView(kType, part, x.data() + from), 0,
                        TensorView{kType, part, y.data() + from}, ScanOptions{}, state);
  }
  r.chunked = bits_of(y.data(), n);
  r.control_after = control_bits();
  return r;
}

template <class T>
class FloatEnvironment : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double, Float16, BFloat16>;
TYPED_TEST_SUITE(FloatEnvironment, FloatTypes);

TYPED_TEST(FloatEnvironment, CallersModesChangeNoBitAndComeBack) {
  using T = TypeParam;
  // Short rows (one block), rows of several blocks, and rows long enough to be split between
  // threads (the default long row is 2^16).
  for (const std::size_t n :
       {std::size_t{2}, std::size_t{40}, std::size_t{3000}, std::size_t{200000}}) {
    const std::vector<T> x = terms<T>(n, 17 + n);
    const std::vector<uint64_t> want_cumsum = exact_prefix(x);
    std::vector<uint64_t> want_sum(n);
    for (std::size_t i = 0; i < n; ++i) {
      exact::Sum s;
      for (const std::size_t k : {i, (i + 1) % n, (i + 7) % n}) s.add(value(x[k]));
      want_sum[i] = s.round_bits(kFormat<T>);
    }
    for (const KernelTable* table : exact_test::kernel_tables()) {
      Tuning tuning;
      tuning.table = table;
      const ScopedTuning scoped(tuning);
      const Results plain = [&] {
        const ScopedThreads one(1);
        return run_all(x);
      }();
      for (const Mode mode : kModes) {
        for (const int threads : {1, 2}) {
          const std::string where = std::to_string(n) + " terms, " + table->isa + ", " +
                                    std::to_string(threads) + " threads, caller " + mode.name;
          Results got;
          {
            const CallerModes caller(mode.bits);
            const ScopedThreads pool(threads);  // workers made in the caller's modes
            got = run_all(x);
          }
          EXPECT_EQ(got.control_after, 0x1f80 | mode.bits) << where;
          EXPECT_EQ(first_difference(got.cumsum, want_cumsum), -1) << "CumSum, " << where;
          EXPECT_EQ(first_difference(got.sum, want_sum), -1) << "Sum, " << where;
          EXPECT_EQ(first_difference(got.chunked, want_cumsum), -1) << "chunked, " << where;
          EXPECT_EQ(first_difference(got.cumprod, plain.cumprod), -1) << "CumProd, " << where;
          if (this->HasFailure()) return;
        }
      }
    }
  }
}

// The data reach what each mode changes: the additions of a plain scan in T's working precision
// (float for the narrow types, whose subnormals bfloat16 shares), done in the caller's modes, give
// other bits than in the default ones, so the test above would see a kernel that ran in them.
// float16's subnormals are normal floats: flushing changes none of its sums.
TYPED_TEST(FloatEnvironment, TheModesWouldChangeTheseSums) {
  using T = TypeParam;
  using W = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const std::vector<T> x = terms<T>(3000, 17 + 3000);
  std::vector<W> wide(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) wide[i] = static_cast<W>(value(x[i]));  // exact
  const auto plain_scan = [&] {
    std::vector<uint64_t> out(x.size());
    volatile W acc = 0;  // each addition done in the modes of the moment
    for (std::size_t i = 0; i < x.size(); ++i) {
      acc = acc + wide[i];
      out[i] = bits(static_cast<W>(acc));
    }
    return out;
  };
  const std::vector<uint64_t> in_default = plain_scan();
  for (const Mode mode : kModes) {
    if (std::is_same_v<T, Float16> && mode.bits == (kFlushToZero | kDenormalsAreZero)) continue;
    std::vector<uint64_t> in_mode;
    {
      const CallerModes caller(mode.bits);
      in_mode = plain_scan();
    }
    EXPECT_NE(first_difference(in_mode, in_default), -1) << mode.name;
  }
}

// A caller that unmasks floating-point exceptions (feenableexcept) would have the kernels trap on
// an infinity, a NaN or an overflowing prefix, input a scan must take: SIGFPE, the program gone.
// The operators mask them for their work; the results are the default environment's.
TYPED_TEST(FloatEnvironment, CallersTrapsDoNotFire) {
  using T = TypeParam;
  constexpr unsigned kInvalid = 0x0080, kDivideByZero = 0x0200, kOverflow = 0x0400;
  constexpr unsigned kUnmasked = 0x1f80 & ~(kInvalid | kDivideByZero | kOverflow);
  const double big = std::ldexp(1.5, kFormat<T>.emax);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<T> x;
  for (const double v : {big, big, -big, 1.0, inf, -inf, 2.0, std::nan(""), 0.0, 3.0}) {
    x.push_back(of<T>(v));
  }
  while (x.size() < 300) x.push_back(x[x.size() % 10]);  // past a vector and a short block
  const Results plain = [&] {
    const ScopedThreads one(1);
    return run_all(x);
  }();
  for (const int threads : {1, 2}) {
    Results got;
    unsigned control = 0;
    {
      _mm_setcsr(kUnmasked | (_mm_getcsr() & kFlags));
      const ScopedThreads pool(threads);
      got = run_all(x);
      control = control_bits();
      _mm_setcsr(0x1f80);  // masked again before anything else runs
    }
    EXPECT_EQ(control, kUnmasked) << threads << " threads";
    EXPECT_EQ(first_difference(got.cumsum, plain.cumsum), -1) << threads << " threads";
    EXPECT_EQ(first_difference(got.cumprod, plain.cumprod), -1) << threads << " threads";
    EXPECT_EQ(first_difference(got.sum, plain.sum), -1) << threads << " threads";
    EXPECT_EQ(first_difference(got.chunked, plain.chunked), -1) << threads << " threads";
  }
}

}  // namespace

#else
TEST(FloatEnvironment, OnlyOnX86) { GTEST_SKIP() << "the modes tested are MXCSR's"; }
#endif
