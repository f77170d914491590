// Randomised property tests of CumSum, CumProd and Sum against the naive reference in reference.h.
//
// Every random test prints its seed; set CUMULUS_TEST_SEED to run with another one. The promises
// checked are DESIGN.md's: integers exact with wraparound; float32, float16 and bfloat16 within
// 1 ulp of the exactly rounded result; float64 within the error bound of double accumulation;
// signed zeros, infinities and NaN exactly as IEEE arithmetic gives them; identical bits for any
// thread count. Where the data make every partial result exact in double, every floating type is
// held to the promise itself: the exact result rounded once, bit for bit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cumulus/dtype.h"
#include "cumulus/error.h"
#include "cumulus/ops.h"
#include "cumulus/tensor.h"
#include "exact.h"
#include "reference.h"

// Test names and failure messages show "float16", not "1-byte object <02>".
namespace cumulus {
static void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }
}  // namespace cumulus

namespace {

using cumulus::BFloat16;
using cumulus::ConstTensorView;
using cumulus::DType;
using cumulus::Float16;
using cumulus::ScanOptions;
using cumulus::Tensor;
using cumulus::TensorView;
using ref::Quad;
using ref::Scan;
using Shape = std::vector<int64_t>;
using Rng = std::mt19937_64;

// ---------------------------------------------------------------------------------------------
// Seeds, reporting.

uint64_t base_seed() {
  const char* env = std::getenv("CUMULUS_TEST_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 0) : 20240611;
}

// The seed of the running test: the base seed mixed with the test's name, printed and recorded.
uint64_t announce_seed() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  uint64_t seed = base_seed();
  for (const char* s : {info->test_suite_name(), info->name()}) {
    for (; *s != 0; ++s) seed = (seed ^ static_cast<unsigned char>(*s)) * 0x100000001b3ULL;
  }
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::printf("[ seed     ] %llu (base %llu; set CUMULUS_TEST_SEED to change)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(base_seed()));
  return seed;
}
#define CUMULUS_SEEDED_RNG(rng)                       \
  const uint64_t rng##_seed = announce_seed();        \
  SCOPED_TRACE("seed " + std::to_string(rng##_seed)); \
  Rng rng(rng##_seed)

// Reports the first few misses of a check in detail and the total count at the end.
class Misses {
 public:
  explicit Misses(std::string what) : what_(std::move(what)) {}
  Misses(const Misses&) = delete;
  Misses& operator=(const Misses&) = delete;
  ~Misses() {
    if (count_ > kShown) ADD_FAILURE() << what_ << ": " << count_ << " mismatches in all";
  }
  void add(const std::string& message) {
    if (++count_ <= kShown) ADD_FAILURE() << what_ << ": " << message;
  }
  int64_t count() const { return count_; }

 private:
  static constexpr int64_t kShown = 6;
  std::string what_;
  int64_t count_ = 0;
};

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i != 0 ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

const char* scan_name(Scan op) { return op == Scan::kSum ? "CumSum" : "CumProd"; }

template <class T>
std::string value_str(T v) {
  if constexpr (ref::kIsFloat<T>) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", ref::Num<T>::to_double(v));
    return buf;
  } else {
    return std::to_string(v);
  }
}

// ---------------------------------------------------------------------------------------------
// Data.

template <class T>
T from_double(double d) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(d);
  } else {
    return ref::Num<T>::from_double_rounded(d);  // correctly rounded (reference rounding)
  }
}

double uniform(Rng& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1p-53;
}

enum class Data {
  kSum,    // floats in [-1, 1] times a per-tensor power of two; integers full-range or small
  kProd,   // floats of magnitude 2^U(-1, 1), either sign; integers mostly in [-3, 3]
  kExact,  // floats only: eighths in [-8, 8], so that every sum is exact in double
};

template <class T>
std::vector<T> make_data(Rng& rng, int64_t n, Data kind) {
  std::vector<T> v(static_cast<size_t>(n));
  if constexpr (std::is_integral_v<T>) {
    for (T& x : v) {
      const uint64_t r = rng();
      if (kind == Data::kProd) {
        x = r % 16 == 0 ? static_cast<T>(r >> 4) : static_cast<T>(static_cast<int64_t>(r % 7) - 3);
      } else {
        x = r % 4 == 0 ? static_cast<T>(r >> 2)
                       : static_cast<T>(static_cast<int64_t>(r % 201) - 100);
      }
    }
  } else {
    // Scales keep sums of the narrow types mostly finite but let float32 and float64 roam.
    const int spread = sizeof(T) == 2 ? 4 : 24;
    const double scale = std::ldexp(1.0, static_cast<int>(rng() % (2 * spread + 1)) - spread);
    for (T& x : v) {
      double d;
      if (kind == Data::kExact) {
        d = static_cast<double>(static_cast<int64_t>(rng() % 129) - 64) / 8;
      } else if (kind == Data::kProd) {
        d = std::exp2(uniform(rng, -1, 1)) * (rng() % 2 != 0 ? -1 : 1);
      } else {
        d = uniform(rng, -1, 1) * scale;
      }
      x = from_double<T>(d);
    }
  }
  return v;
}

// Now and then an infinity, a NaN, a signed zero or the smallest subnormal.
template <class T>
void sprinkle_specials(Rng& rng, std::vector<T>& v) {
  const double specials[] = {std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(),
                             -0.0,
                             0.0,
                             ref::Num<T>::to_double(ref::Num<T>::smallest_subnormal())};
  for (T& e : v) {
    if (rng() % 40 == 0) e = from_double<T>(specials[rng() % std::size(specials)]);
  }
}

// Data whose every partial result is exact in double, in any order and grouping. The kernels
// accumulate in double and round once, so on such data they make no error at all: each output must
// be the exact result rounded once, bit for bit, ties to even, overflow to infinity and subnormal
// results included.
//
// Sums: values on one grid, +-m * 2^e with m < 2^bits and e in [low, low + span]. They are
// multiples of 2^low below 2^(low + span + bits), so a sum of at most `terms` of them is a multiple
// of 2^low below 2^(bit_width(terms) + low + span + bits) <= 2^(low + 53).
struct ExactGrid {
  int bits;
  int low;
  int span;
};

// The significand width of T and the exponents of its smallest subnormal and of 2^(emax + 1).
template <class T>
constexpr std::array<int, 3> kFormat = std::is_same_v<T, float>     ? std::array{24, -149, 128}
                                       : std::is_same_v<T, double>  ? std::array{53, -1074, 1024}
                                       : std::is_same_v<T, Float16> ? std::array{11, -24, 16}
                                                                    : std::array{8, -133, 128};

template <class T>
ExactGrid exact_grid(Rng& rng, int64_t terms) {
  const auto [digits, min_exp, max_exp] = kFormat<T>;
  const int budget = 53 - static_cast<int>(std::bit_width(static_cast<uint64_t>(terms)));
  const int bits = std::min(digits, budget - 8);
  const int span = static_cast<int>(
      rng() % static_cast<uint64_t>(std::min(budget - bits, max_exp - min_exp - bits) + 1));
  // The largest value representable in T, and sums far below double's overflow.
  const int top = std::min(max_exp - bits - span, 1023 - 53);
  const int low = min_exp + static_cast<int>(rng() % static_cast<uint64_t>(top - min_exp + 1));
  return {bits, low, span};
}

template <class T>
std::vector<T> exact_sum_data(Rng& rng, const ExactGrid& grid, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) {
    const auto m = static_cast<double>(rng() >> (64 - grid.bits));
    const int e = grid.low + static_cast<int>(rng() % static_cast<uint64_t>(grid.span + 1));
    const double d = std::ldexp(rng() % 2 != 0 ? -m : m, e);
    x = from_double<T>(d);
    EXPECT_EQ(ref::Num<T>::to_double(x), d) << "not on the grid: the test's own mistake";
  }
  return v;
}

// Products along `axis`: +-2^k times odd integers whose product over each line stays at most 2^53
// (so every partial product's significand fits in double), the |k| of a line adding up to at most
// 900 (so every partial product stays inside double's normal range). The k drift up or down in
// some tensors, so that products overflow T or pass through its subnormals.
template <class T>
std::vector<T> exact_product_data(Rng& rng, const Shape& shape, int64_t axis) {
  static constexpr uint64_t kOdd[] = {1, 1, 1, 1, 3, 5, 7, 9, 11, 13, 15, 17};
  const int64_t n = ref::count_of(shape);
  const int64_t length = shape[static_cast<size_t>(axis)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t lines = length == 0 ? 0 : n / length;
  std::vector<uint64_t> odd_product(static_cast<size_t>(lines), 1);
  std::vector<int> exponents(static_cast<size_t>(lines), 0);
  const int drift = static_cast<int>(rng() % 5) - 2;
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto line = static_cast<size_t>(i / (length * inner) * inner + i % inner);
    uint64_t odd = kOdd[rng() % std::size(kOdd)];
    if (odd_product[line] * odd > (uint64_t{1} << 53)) odd = 1;
    odd_product[line] *= odd;
    int k = drift + static_cast<int>(rng() % 3) - 1;
    if (exponents[line] + std::abs(k) > 900) k = 0;
    exponents[line] += std::abs(k);
    const double d = std::ldexp(static_cast<double>(odd) * (rng() % 2 != 0 ? -1 : 1), k);
    v[static_cast<size_t>(i)] = from_double<T>(d);
  }
  return v;
}

// Exact data for a scan along `axis` (normalised).
template <class T>
std::vector<T> exact_data(Rng& rng, Scan op, const Shape& shape, int64_t axis) {
  if (op == Scan::kProd) return exact_product_data<T>(rng, shape, axis);
  const ExactGrid grid = exact_grid<T>(rng, std::max<int64_t>(1, shape[static_cast<size_t>(axis)]));
  return exact_sum_data<T>(rng, grid, ref::count_of(shape));
}

// Now and then a signed zero, an infinity or a NaN: values that keep every result exact. Rare, as
// each one decides the rest of its line.
template <class T>
void sprinkle_exact_specials(Rng& rng, std::vector<T>& v) {
  const double specials[] = {std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(), -0.0, 0.0};
  for (T& e : v) {
    if (rng() % 256 == 0) e = from_double<T>(specials[rng() % std::size(specials)]);
  }
}

// ---------------------------------------------------------------------------------------------
// Calling the library with different buffer arrangements.

enum class Buffers { kSeparate, kInPlace, kMisaligned, kAllocating };
constexpr Buffers kAllBuffers[] = {Buffers::kSeparate, Buffers::kInPlace, Buffers::kMisaligned,
                                   Buffers::kAllocating};
const char* buffers_name(Buffers b) {
  switch (b) {
    case Buffers::kSeparate:
      return "separate";
    case Buffers::kInPlace:
      return "in-place";
    case Buffers::kMisaligned:
      return "misaligned";
    case Buffers::kAllocating:
      break;
  }
  return "allocating";
}

Buffers random_buffers(Rng& rng) { return kAllBuffers[rng() % std::size(kAllBuffers)]; }

// How many scans ran in each combination of buffers, exclusive, reverse and axis spelling, so a
// test that draws them independently can require that every combination was reached.
class ScanCoverage {
 public:
  void add(Buffers mode, ScanOptions o, bool negative_axis) {
    ++counts_[index(mode, o.exclusive, o.reverse, negative_axis)];
  }
  void expect_all_reached(const std::string& what) const {
    for (const Buffers mode : kAllBuffers) {
      for (int k = 0; k < 8; ++k) {
        const bool exclusive = (k & 1) != 0, reverse = (k & 2) != 0, negative = (k & 4) != 0;
        EXPECT_GT(counts_[index(mode, exclusive, reverse, negative)], 0)
            << what << ": no scan with buffers=" << buffers_name(mode) << " exclusive=" << exclusive
            << " reverse=" << reverse
            << (negative ? " and a negative axis" : " and a non-negative axis");
      }
    }
  }

 private:
  static size_t index(Buffers mode, bool exclusive, bool reverse, bool negative_axis) {
    return static_cast<size_t>(mode) * 8 + (exclusive ? 1 : 0) + (reverse ? 2 : 0) +
           (negative_axis ? 4 : 0);
  }
  std::array<int64_t, 32> counts_{};
};

void lib_scan(Scan op, ConstTensorView x, int64_t axis, TensorView y, ScanOptions o) {
  if (op == Scan::kSum) {
    cumulus::cumsum(x, axis, y, o);
  } else {
    cumulus::cumprod(x, axis, y, o);
  }
}

template <class T>
void fill_poison(T* p, size_t n) {
  std::memset(static_cast<void*>(p), 0xA5, n * sizeof(T));
}

template <class T>
bool same_bits(const T* a, const T* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(T)) == 0;
}

// Runs the scan and returns y. Also checks that a separate input is left alone and that the
// misaligned output's neighbours are not written.
template <class T>
std::vector<T> run_scan(Scan op, const std::vector<T>& x, const Shape& shape, int64_t axis,
                        ScanOptions o, Buffers mode) {
  constexpr DType kType = cumulus::dtype_of<T>;
  const size_t n = x.size();
  switch (mode) {
    case Buffers::kSeparate: {
      Tensor xt(kType, shape);
      Tensor yt(kType, shape);
      std::copy(x.begin(), x.end(), xt.data<T>());
      fill_poison(yt.data<T>(), n);
      lib_scan(op, std::as_const(xt).view(), axis, yt.view(), o);
      EXPECT_TRUE(same_bits(xt.data<T>(), x.data(), n)) << "input modified";
      return {yt.data<T>(), yt.data<T>() + n};
    }
    case Buffers::kInPlace: {
      Tensor t(kType, shape);
      std::copy(x.begin(), x.end(), t.data<T>());
      lib_scan(op, std::as_const(t).view(), axis, t.view(), o);
      return {t.data<T>(), t.data<T>() + n};
    }
    case Buffers::kMisaligned: {
      // One element past an allocation: misaligned for every vector width wider than T.
      std::vector<T> xs(n + 2);
      std::vector<T> ys(n + 2);
      fill_poison(xs.data(), n + 2);
      fill_poison(ys.data(), n + 2);
      std::copy(x.begin(), x.end(), xs.begin() + 1);
      lib_scan(op, ConstTensorView(kType, shape, xs.data() + 1), axis,
               TensorView{kType, shape, ys.data() + 1}, o);
      std::vector<T> poison(1);
      fill_poison(poison.data(), 1);
      EXPECT_TRUE(same_bits(&ys[0], poison.data(), 1) && same_bits(&ys[n + 1], poison.data(), 1))
          << "wrote outside the output";
      EXPECT_TRUE(same_bits(xs.data() + 1, x.data(), n)) << "input modified";
      return {ys.begin() + 1, ys.begin() + 1 + static_cast<std::ptrdiff_t>(n)};
    }
    case Buffers::kAllocating:
      break;
  }
  const ConstTensorView xv(kType, shape, x.data());
  const Tensor y = op == Scan::kSum ? cumulus::cumsum(xv, axis, o) : cumulus::cumprod(xv, axis, o);
  EXPECT_EQ(y.dtype(), kType);
  EXPECT_EQ(y.shape(), shape);
  if (y.dtype() != kType || y.size() != static_cast<int64_t>(n)) return std::vector<T>(n);
  return {y.data<T>(), y.data<T>() + n};
}

// How a floating result is compared with the reference: within the promised tolerance, or bit
// for bit (for data whose partial results are all exact in double).
enum class Compare { kWithinPromise, kBitForBit };

// Checks one scan against the reference; returns the number of wrong elements.
template <class T>
int64_t check_scan(Scan op, const std::vector<T>& x, const Shape& shape, int64_t axis,
                   ScanOptions o, Buffers mode, Compare compare = Compare::kWithinPromise) {
  const std::vector<T> got = run_scan(op, x, shape, axis, o, mode);
  const std::string what =
      std::string(scan_name(op)) + " " + std::string(cumulus::dtype_name(cumulus::dtype_of<T>)) +
      " shape " + shape_str(shape) + " axis " + std::to_string(axis) +
      " exclusive=" + std::to_string(o.exclusive) + " reverse=" + std::to_string(o.reverse) +
      " buffers=" + buffers_name(mode);
  Misses misses(what);
  if constexpr (std::is_integral_v<T>) {
    const std::vector<T> want = ref::scan_int(op, x, shape, axis, o.exclusive, o.reverse);
    for (size_t i = 0; i < x.size(); ++i) {
      if (got[i] != want[i]) {
        misses.add("element " + std::to_string(i) + ": got " + value_str(got[i]) + ", want " +
                   value_str(want[i]));
      }
    }
  } else {
    const std::vector<ref::Exact> want =
        ref::scan_float(op, x, shape, axis, o.exclusive, o.reverse);
    for (size_t i = 0; i < x.size(); ++i) {
      const std::string miss = compare == Compare::kBitForBit
                                   ? ref::check_float_exact(got[i], want[i])
                                   : ref::check_float(got[i], want[i]);
      if (!miss.empty()) misses.add("element " + std::to_string(i) + ": " + miss);
    }
  }
  return misses.count();
}

// A random shape of the given rank with dimensions from the interesting list, at most `budget`
// elements; unless `short_only`, now and then one dimension is long (1000-5000) and the rest small.
Shape random_shape(Rng& rng, int rank, int64_t budget, bool short_only = false) {
  // Around vector widths and around 256, the tile width of column-blocked kernels.
  static constexpr int64_t kDims[] = {1,  1,  2,  3,  4,  5,  7,  8,   9,   15, 16,
                                      17, 31, 32, 33, 63, 64, 65, 255, 256, 257};
  Shape s(static_cast<size_t>(rank));
  for (int64_t& d : s) d = kDims[rng() % std::size(kDims)];
  while (ref::count_of(s) > budget) *std::max_element(s.begin(), s.end()) = 1 + rng() % 3;
  if (!short_only && rng() % 8 == 0) {
    // One dimension of 1000-5000, the others 1 except at most two 2s.
    const size_t long_dim = rng() % s.size();
    int twos = 0;
    for (size_t d = 0; d < s.size(); ++d) {
      if (d == long_dim) {
        s[d] = 1000 + static_cast<int64_t>(rng() % 4001);
      } else {
        s[d] = s[d] >= 2 && twos < 2 ? 2 : 1;
        twos += s[d] == 2 ? 1 : 0;
      }
    }
  }
  if (rng() % 12 == 0) s[rng() % s.size()] = 0;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Random scans: every dtype, ranks 1-6, every axis, every attribute combination, both operators;
// the axis spelling and the buffer arrangement drawn at random for each scan, independently of
// the attributes and of each other, and every combination of the four required to occur.

std::string dtype_test_name(const ::testing::TestParamInfo<DType>& param_info) {
  return std::string(cumulus::dtype_name(param_info.param));
}

class ScanProperty : public ::testing::TestWithParam<DType> {};

TEST_P(ScanProperty, MatchesReference) {
  CUMULUS_SEEDED_RNG(rng);
  int64_t calls = 0;
  int64_t wrong = 0;
  int64_t elements = 0;
  ScanCoverage coverage[2];  // CumSum, CumProd
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    for (int c = 0; c < 36; ++c) {
      const int rank = 1 + c % 6;
      const Shape shape = random_shape(rng, rank, 1200);
      for (const Scan op : {Scan::kSum, Scan::kProd}) {
        const std::vector<T> x =
            make_data<T>(rng, ref::count_of(shape), op == Scan::kSum ? Data::kSum : Data::kProd);
        for (int a = 0; a < rank; ++a) {
          for (int k = 0; k < 4; ++k) {
            const ScanOptions o{.exclusive = (k & 1) != 0, .reverse = (k & 2) != 0};
            const bool negative = rng() % 2 != 0;
            const Buffers mode = random_buffers(rng);
            wrong += check_scan(op, x, shape, negative ? a - rank : a, o, mode);
            coverage[op == Scan::kSum ? 0 : 1].add(mode, o, negative);
            ++calls;
            elements += static_cast<int64_t>(x.size());
          }
        }
      }
    }
  });
  coverage[0].expect_all_reached("CumSum");
  coverage[1].expect_all_reached("CumProd");
  RecordProperty("elements", std::to_string(elements));
  std::printf("[ checked  ] %lld scans, %lld elements\n", static_cast<long long>(calls),
              static_cast<long long>(elements));
  EXPECT_GT(calls, 500);
  EXPECT_GT(elements, 100000);
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ScanProperty, ::testing::ValuesIn(cumulus::kAllDTypes),
                         dtype_test_name);

// Data whose partial results are all exact in double (see exact_grid): every output must be the
// exact prefix rounded once, bit for bit, where the 1-ulp check above would let a wrong rounding
// (truncation, a double rounding, max-finite for infinity, +0 for -0) pass. The whole cross
// product of buffers, attributes and axis spelling, three times over for each operator, each time
// with its own shape, axis and data; signed zeros, infinities and NaN in half of them.
class ExactScan : public ::testing::TestWithParam<DType> {};

TEST_P(ExactScan, RoundsOnceBitForBit) {
  CUMULUS_SEEDED_RNG(rng);
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    if constexpr (ref::kIsFloat<T>) {
      int64_t wrong = 0;
      int64_t elements = 0;
      for (int round = 0; round < 3; ++round) {
        for (const Buffers mode : kAllBuffers) {
          for (int k = 0; k < 8; ++k) {
            const ScanOptions o{.exclusive = (k & 1) != 0, .reverse = (k & 2) != 0};
            const bool negative = (k & 4) != 0;
            for (const Scan op : {Scan::kSum, Scan::kProd}) {
              const Shape shape = random_shape(rng, 1 + static_cast<int>(rng() % 4), 1200);
              const auto rank = static_cast<int64_t>(shape.size());
              const auto a = static_cast<int64_t>(rng() % shape.size());
              std::vector<T> x = exact_data<T>(rng, op, shape, a);
              if (rng() % 2 == 0) sprinkle_exact_specials(rng, x);
              wrong +=
                  check_scan(op, x, shape, negative ? a - rank : a, o, mode, Compare::kBitForBit);
              elements += static_cast<int64_t>(x.size());
            }
          }
        }
      }
      std::printf("[ checked  ] %lld elements\n", static_cast<long long>(elements));
      EXPECT_GT(elements, 50000);
      EXPECT_EQ(wrong, 0);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Floats, ExactScan,
                         ::testing::Values(DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                           DType::kBFloat16),
                         dtype_test_name);

TEST(ScanErrors, RankZeroAndOutOfRangeAxesAreErrors) {
  for (const DType t : cumulus::kAllDTypes) {
    SCOPED_TRACE(std::string(cumulus::dtype_name(t)));
    Tensor scalar = Tensor::zeros(t, {});
    Tensor out = Tensor::zeros(t, {});
    for (const Scan op : {Scan::kSum, Scan::kProd}) {
      for (const int64_t axis : {0, -1, 1}) {
        try {
          lib_scan(op, std::as_const(scalar).view(), axis, out.view(), {});
          ADD_FAILURE() << scan_name(op) << " of a rank-0 tensor did not throw (axis " << axis
                        << ")";
        } catch (const cumulus::Error& e) {
          EXPECT_EQ(e.code(), cumulus::ErrorCode::kInvalidArgument) << e.what();
        }
      }
      Tensor x = Tensor::zeros(t, {2, 3});
      Tensor y = Tensor::zeros(t, {2, 3});
      for (const int64_t axis :
           {int64_t{2}, int64_t{-3}, int64_t{100}, std::numeric_limits<int64_t>::min()}) {
        EXPECT_THROW(lib_scan(op, std::as_const(x).view(), axis, y.view(), {}), cumulus::Error)
            << scan_name(op) << " axis " << axis;
        EXPECT_FALSE(ref::normalise_axis(axis, 2).has_value());
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Long scans: every output of a long prefix the exact prefix rounded once (the values, multiples
// of 2^-52 below 2^18, sum exactly in binary128).

template <class T>
void check_long_scan(Rng& rng, int64_t n) {
  std::vector<T> x(static_cast<size_t>(n));
  for (T& v : x) v = from_double<T>(uniform(rng, -1, 1));
  for (const bool reverse : {false, true}) {
    EXPECT_EQ(check_scan(Scan::kSum, x, {n}, 0, {.exclusive = false, .reverse = reverse},
                         Buffers::kSeparate, Compare::kBitForBit),
              0);
  }
  EXPECT_EQ(check_scan(Scan::kSum, x, {n}, -1, {.exclusive = true}, Buffers::kMisaligned,
                       Compare::kBitForBit),
            0);
  // Exact data (see exact_grid): every output bit for bit, across the pieces of the long row.
  const std::vector<T> e = exact_data<T>(rng, Scan::kSum, {n}, 0);
  EXPECT_EQ(check_scan(Scan::kSum, e, {n}, 0, {}, Buffers::kSeparate, Compare::kBitForBit), 0);
  EXPECT_EQ(check_scan(Scan::kSum, e, {n}, -1, {.exclusive = true, .reverse = true},
                       Buffers::kInPlace, Compare::kBitForBit),
            0);
  // -0 throughout but for one +0 a quarter from the end: the carries between pieces keep the
  // sign of zero, so every output before that +0 (in scan order) is -0.
  std::vector<T> zeros(static_cast<size_t>(n), from_double<T>(-0.0));
  zeros[static_cast<size_t>(n - n / 4)] = from_double<T>(0.0);
  for (int k = 0; k < 4; ++k) {
    const ScanOptions o{.exclusive = (k & 1) != 0, .reverse = (k & 2) != 0};
    EXPECT_EQ(check_scan(Scan::kSum, zeros, {n}, 0, o, Buffers::kSeparate, Compare::kBitForBit), 0);
  }
}

TEST(LongScan, Float32TwoHundredThousand) {
  CUMULUS_SEEDED_RNG(rng);
  check_long_scan<float>(rng, 200000);
}
TEST(LongScan, Float16HundredThousand) {
  CUMULUS_SEEDED_RNG(rng);
  check_long_scan<Float16>(rng, 100003);
}
TEST(LongScan, BFloat16HundredThousand) {
  CUMULUS_SEEDED_RNG(rng);
  check_long_scan<BFloat16>(rng, 100003);
}
TEST(LongScan, Float64HundredThousand) {
  CUMULUS_SEEDED_RNG(rng);
  check_long_scan<double>(rng, 100003);
}

// A million copies of 0.1f: float accumulation drifts by thousands of ulps; the promise is the
// exact sum rounded once.
TEST(LongScan, Float32DoesNotDrift) {
  constexpr int64_t kN = 1000000;
  const Shape shape{kN};
  const std::vector<float> x(kN, 0.1f);
  const Tensor y = cumulus::cumsum(ConstTensorView(DType::kFloat32, shape, x.data()), 0);
  ASSERT_EQ(y.size(), kN);
  const Quad tenth = 0.1f;
  float naive = 0;
  int64_t naive_worst = 0;
  Misses misses("CumSum of 10^6 copies of 0.1f");
  for (int64_t i = 0; i < kN; ++i) {
    const float want = static_cast<float>(tenth * static_cast<Quad>(i + 1));  // exact, rounded once
    naive += 0.1f;
    naive_worst = std::max(naive_worst, ref::ulp_distance(naive, want));
    const float got = y.data<float>()[i];
    if (ref::ulp_distance(got, want) != 0) {
      misses.add("element " + std::to_string(i) + ": got " + value_str(got) + ", want " +
                 value_str(want) + " (" + std::to_string(ref::ulp_distance(got, want)) + " ulps)");
    }
  }
  EXPECT_EQ(misses.count(), 0);
  EXPECT_GT(naive_worst, 1000)
      << "float accumulation should drift here, or this test proves nothing";
}

// ---------------------------------------------------------------------------------------------
// Integer overflow: two's-complement wraparound, against the unsigned reference.

template <class T>
std::vector<T> scan_1d(Scan op, const std::vector<T>& x, ScanOptions o = {}) {
  return run_scan(op, x, {static_cast<int64_t>(x.size())}, 0, o, Buffers::kSeparate);
}

// Every axis in both spellings, every attribute combination, every arrangement of buffers: the
// whole cross product over the same values.
template <class T>
void check_all_ways(Scan op, const std::vector<T>& x, const Shape& shape) {
  for (int64_t axis = -static_cast<int64_t>(shape.size());
       axis < static_cast<int64_t>(shape.size()); ++axis) {
    for (int k = 0; k < 4; ++k) {
      const ScanOptions o{.exclusive = (k & 1) != 0, .reverse = (k & 2) != 0};
      for (const Buffers mode : kAllBuffers) EXPECT_EQ(check_scan(op, x, shape, axis, o, mode), 0);
    }
  }
}

TEST(IntegerOverflow, Int32CumSumWrapsPastMax) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  const std::vector<int32_t> y = scan_1d<int32_t>(Scan::kSum, {kMax, 1, 1, kMax, kMax, kMin, -1});
  EXPECT_EQ(y, (std::vector<int32_t>{kMax, kMin, kMin + 1, 0, kMax, -1, -2}));
  CUMULUS_SEEDED_RNG(rng);
  std::vector<int32_t> x(17 * 33);
  for (int32_t& v : x) v = kMax - static_cast<int32_t>(rng() % 1000);
  check_all_ways(Scan::kSum, x, {17, 33});
  std::vector<int32_t> big(4099);
  for (int32_t& v : big) v = static_cast<int32_t>(static_cast<uint32_t>(rng()));
  check_all_ways(Scan::kSum, big, {4099});
}

TEST(IntegerOverflow, Int64CumProdWraps) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> twos(65, 2);
  const std::vector<int64_t> y = scan_1d(Scan::kProd, twos);
  EXPECT_EQ(y[61], int64_t{1} << 62);
  EXPECT_EQ(y[62], kMin);  // 2^63 wraps to the most negative value
  EXPECT_EQ(y[63], 0);
  EXPECT_EQ(y[64], 0);
  // INT64_MIN * -1 is undefined in signed arithmetic; wrapped it is INT64_MIN again.
  EXPECT_EQ(scan_1d<int64_t>(Scan::kProd, {kMin, -1, -1}),
            (std::vector<int64_t>{kMin, kMin, kMin}));
  // 3^41 overflows; compare with the unsigned product.
  const std::vector<int64_t> threes(64, 3);
  const std::vector<int64_t> p = scan_1d(Scan::kProd, threes);
  uint64_t want = 1;
  for (size_t i = 0; i < threes.size(); ++i) {
    want *= 3;
    EXPECT_EQ(static_cast<uint64_t>(p[i]), want) << "element " << i;
  }
  CUMULUS_SEEDED_RNG(rng);
  std::vector<int64_t> x(9 * 16 * 5);
  for (int64_t& v : x) v = static_cast<int64_t>(rng() | 1);  // odd: products never reach 0
  check_all_ways(Scan::kProd, x, {9, 16, 5});
}

TEST(IntegerOverflow, UnsignedWrap) {
  constexpr uint32_t kMax32 = std::numeric_limits<uint32_t>::max();
  constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(scan_1d<uint32_t>(Scan::kSum, {kMax32, 1, 5}), (std::vector<uint32_t>{kMax32, 0, 5}));
  EXPECT_EQ(scan_1d<uint32_t>(Scan::kProd, {65536, 65536, 7}),
            (std::vector<uint32_t>{65536, 0, 0}));
  EXPECT_EQ(scan_1d<uint32_t>(Scan::kProd, {kMax32, kMax32}), (std::vector<uint32_t>{kMax32, 1}));
  EXPECT_EQ(scan_1d<uint64_t>(Scan::kSum, {kMax64, 2, kMax64}),
            (std::vector<uint64_t>{kMax64, 1, 0}));
  EXPECT_EQ(scan_1d<uint64_t>(Scan::kProd, {uint64_t{1} << 32, uint64_t{1} << 32, 3}),
            (std::vector<uint64_t>{uint64_t{1} << 32, 0, 0}));
  EXPECT_EQ(scan_1d<uint64_t>(Scan::kSum, {kMax64, kMax64}, {.exclusive = true, .reverse = true}),
            (std::vector<uint64_t>{kMax64, 0}));
  CUMULUS_SEEDED_RNG(rng);
  std::vector<uint32_t> x32(33 * 31);
  for (uint32_t& v : x32) v = static_cast<uint32_t>(rng());
  check_all_ways(Scan::kSum, x32, {33, 31});
  check_all_ways(Scan::kProd, x32, {33, 31});
  std::vector<uint64_t> x64(15 * 17);
  for (uint64_t& v : x64) v = rng();
  check_all_ways(Scan::kSum, x64, {15, 17});
  check_all_ways(Scan::kProd, x64, {15, 17});
}

// ---------------------------------------------------------------------------------------------
// NaN and infinity.

template <class T>
double as_double(T v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<double>(v);
  } else {
    return ref::Num<T>::to_double(v);
  }
}

template <class T>
void check_nan_propagation(Rng& rng) {
  const Shape shape{5, 9};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int trial = 0; trial < 6; ++trial) {
    for (const Scan op : {Scan::kSum, Scan::kProd}) {
      std::vector<T> x = make_data<T>(rng, 45, Data::kProd);  // finite, magnitudes near 1
      const int64_t nr = static_cast<int64_t>(rng() % 5);
      const int64_t nc = static_cast<int64_t>(rng() % 9);
      x[static_cast<size_t>(nr * 9 + nc)] = from_double<T>(nan);
      for (const int64_t axis : {0, 1, -1, -2}) {
        for (int k = 0; k < 16; ++k) {
          const ScanOptions o{.exclusive = (k & 1) != 0, .reverse = (k & 2) != 0};
          const std::vector<T> y = run_scan(op, x, shape, axis, o, kAllBuffers[k / 4]);
          const bool along_rows = axis == 1 || axis == -1;
          for (int64_t r = 0; r < 5; ++r) {
            for (int64_t c = 0; c < 9; ++c) {
              const bool same_line = along_rows ? r == nr : c == nc;
              const int64_t pos = along_rows ? c : r;
              const int64_t nan_pos = along_rows ? nc : nr;
              const bool after = o.reverse ? pos < nan_pos : pos > nan_pos;
              const bool want_nan = same_line && (after || (pos == nan_pos && !o.exclusive));
              const bool is_nan = std::isnan(as_double(y[static_cast<size_t>(r * 9 + c)]));
              EXPECT_EQ(is_nan, want_nan)
                  << scan_name(op) << " axis " << axis << " exclusive " << o.exclusive
                  << " reverse " << o.reverse << " buffers " << buffers_name(kAllBuffers[k / 4])
                  << " NaN at (" << nr << ", " << nc << "), output (" << r << ", " << c << ")";
            }
          }
        }
      }
    }
  }
}

template <class T>
void expect_values(const std::vector<T>& got, const std::vector<double>& want,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = as_double(got[i]);
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g)) << what << " element " << i << " is " << g << ", want NaN";
    } else {
      EXPECT_EQ(g, want[i]) << what << " element " << i;
    }
  }
}

template <class T>
void check_infinities() {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto xs = [](std::vector<double> d) {
    std::vector<T> v;
    for (double e : d) v.push_back(from_double<T>(e));
    return v;
  };
  const std::vector<T> s = xs({1, inf, 2, -inf, 3});
  expect_values(scan_1d(Scan::kSum, s), {1, inf, inf, nan, nan}, "inf + -inf");
  expect_values(scan_1d(Scan::kSum, s, {.exclusive = true}), {0, 1, inf, inf, nan}, "exclusive");
  expect_values(scan_1d(Scan::kSum, s, {.reverse = true}), {nan, nan, -inf, -inf, 3}, "reverse");
  expect_values(scan_1d(Scan::kSum, s, {.exclusive = true, .reverse = true}),
                {nan, -inf, -inf, 3, 0}, "exclusive reverse");
  expect_values(scan_1d(Scan::kProd, xs({2, inf, 0, 3})), {2, inf, nan, nan}, "inf * 0");
  expect_values(scan_1d(Scan::kProd, xs({2, -inf, -1, 0.5})), {2, -inf, inf, inf}, "-inf * -1");
  expect_values(scan_1d(Scan::kProd, xs({0, inf, 1}), {.exclusive = true}), {1, 0, nan},
                "exclusive 0 * inf");
  expect_values(scan_1d(Scan::kSum, xs({inf, inf, 5})), {inf, inf, inf}, "inf + inf");
}

class FloatTypes : public ::testing::TestWithParam<DType> {};

TEST_P(FloatTypes, NaNPropagatesInScanDirection) {
  CUMULUS_SEEDED_RNG(rng);
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    if constexpr (ref::kIsFloat<T>) check_nan_propagation<T>(rng);
  });
}

TEST_P(FloatTypes, InfinityArithmetic) {
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    if constexpr (ref::kIsFloat<T>) check_infinities<T>();
  });
}

// Results beyond the type's range become infinities, results below it zeros (or subnormals),
// exactly as rounding the exact product or sum would give.
TEST_P(FloatTypes, OverflowAndUnderflow) {
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    if constexpr (ref::kIsFloat<T>) {
      const int emax = std::is_same_v<T, Float16> ? 15 : std::is_same_v<T, double> ? 1023 : 127;
      const int emin = std::is_same_v<T, Float16>  ? -24
                       : std::is_same_v<T, double> ? -1074
                       : std::is_same_v<T, float>  ? -149
                                                   : -133;
      const int step = (emax - emin) / 4 + 1;  // 2^(6 * step) is beyond either end of the range
      const int steps = 6;
      std::vector<T> up(steps, from_double<T>(std::ldexp(1.5, step)));
      std::vector<T> down(steps, from_double<T>(-std::ldexp(0.75, -step)));
      std::vector<T> x = up;
      x.insert(x.end(), down.begin(), down.end());
      // Up past the type's range and back: the wide accumulator brings it home (float64 has no
      // wider accumulator, so its intermediate overflow is expected and not tested here).
      if (!std::is_same_v<T, double>) {
        EXPECT_EQ(
            check_scan(Scan::kProd, x, {static_cast<int64_t>(x.size())}, 0, {}, Buffers::kSeparate),
            0);
      }
      const std::vector<T> y = scan_1d(Scan::kProd, up);
      EXPECT_TRUE(std::isinf(as_double(y.back())));
      const std::vector<T> small = scan_1d(Scan::kProd, down);
      const double last = as_double(small.back());
      EXPECT_EQ(last, 0.0);                  // (0.75 * 2^-step)^6 is far below 2^emin
      EXPECT_EQ(std::signbit(last), false);  // six negative factors
      // A product landing on the smallest subnormal exactly.
      const std::vector<T> sub =
          scan_1d(Scan::kProd, std::vector<T>{from_double<T>(std::ldexp(1.0, emin / 2)),
                                              from_double<T>(std::ldexp(1.0, emin - emin / 2))});
      EXPECT_EQ(as_double(sub.back()), std::ldexp(1.0, emin));
      // Sums that overflow the type but not the wide accumulator come back when cancelled.
      const double big = ref::Num<T>::to_double(from_double<T>(std::ldexp(1.5, emax)));
      if (!std::is_same_v<T, double>) {
        expect_values(scan_1d(Scan::kSum, std::vector<T>{from_double<T>(big), from_double<T>(big),
                                                         from_double<T>(-big)}),
                      {big, std::numeric_limits<double>::infinity(), big},
                      "wide accumulator keeps max + max - max finite");
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Floats, FloatTypes,
                         ::testing::Values(DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                           DType::kBFloat16),
                         dtype_test_name);

// ---------------------------------------------------------------------------------------------
// Identities. Integers use random data; floating types use data whose sums and products are exact
// in double (eighths; ±1, ±2, ±1/2 and a few ±3, ±3/2), so that every summation order gives the
// same double and one rounding: the identities then hold bit for bit for every type.

template <class T>
std::vector<T> identity_data(Rng& rng, Scan op, int64_t n) {
  if constexpr (std::is_integral_v<T>) {
    return make_data<T>(rng, n, op == Scan::kSum ? Data::kSum : Data::kProd);
  } else {
    if (op == Scan::kSum) return make_data<T>(rng, n, Data::kExact);
    // At most 33 factors of 3 in the whole tensor (3^33 < 2^53): every partial product is exact.
    static constexpr double kFactors[] = {1, -1, 2, -2, 0.5, -0.5, 3, -3, 1.5, -1.5};
    std::vector<T> v(static_cast<size_t>(n));
    int threes = 0;
    for (T& e : v) {
      size_t pick = rng() % std::size(kFactors);
      if (pick >= 6 && ++threes > 33) pick -= 6;
      e = from_double<T>(kFactors[pick]);
    }
    return v;
  }
}

// Index helpers along one axis of a row-major shape.
struct Lines {
  Shape shape;
  int64_t axis;  // normalised
  int64_t n() const { return shape[static_cast<size_t>(axis)]; }
  int64_t stride() const {
    int64_t s = 1;
    for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) s *= shape[d];
    return s;
  }
  // Calls f(base) for the first element of every line.
  template <class F>
  void each(F f) const {
    const int64_t inner = stride();
    int64_t outer = 1;
    for (size_t d = 0; d < static_cast<size_t>(axis); ++d) outer *= shape[d];
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) f(o * n() * inner + i);
    }
  }
};

template <class T>
bool bit_equal(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return a == b;
  } else {
    return ref::bits_of(a) == ref::bits_of(b) || (as_double(a) == 0 && as_double(b) == 0);  // ±0
  }
}

class Identities : public ::testing::TestWithParam<DType> {};

TEST_P(Identities, ExclusiveIsShiftedInclusiveAndLastIsTotal) {
  CUMULUS_SEEDED_RNG(rng);
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    Misses misses("identities");
    int64_t checked = 0;
    for (int c = 0; c < 24; ++c) {
      const Shape shape = random_shape(rng, 1 + c % 4, 600, /*short_only=*/true);
      const auto rank = static_cast<int64_t>(shape.size());
      for (const Scan op : {Scan::kSum, Scan::kProd}) {
        const std::vector<T> x = identity_data<T>(rng, op, ref::count_of(shape));
        for (int64_t a = 0; a < rank; ++a) {
          const Lines lines{shape, a};
          const int64_t axis = rng() % 2 == 0 ? a : a - rank;
          for (const bool reverse : {false, true}) {
            const std::vector<T> inc =
                run_scan(op, x, shape, axis, {.reverse = reverse}, random_buffers(rng));
            const std::vector<T> exc = run_scan(
                op, x, shape, axis, {.exclusive = true, .reverse = reverse}, random_buffers(rng));
            const std::vector<T> other =
                run_scan(op, x, shape, axis, {.reverse = !reverse}, random_buffers(rng));
            const std::string what = std::string(scan_name(op)) + " shape " + shape_str(shape) +
                                     " axis " + std::to_string(axis) + " reverse " +
                                     std::to_string(reverse);
            lines.each([&](int64_t base) {
              const int64_t n = lines.n();
              auto at = [&](int64_t k) {  // k-th element in scan order
                return static_cast<size_t>(base + (reverse ? n - 1 - k : k) * lines.stride());
              };
              // The plain total of the line, exact, rounded once.
              uint64_t total_int = op == Scan::kSum ? 0 : 1;
              Quad total = op == Scan::kSum ? 0 : 1;
              for (int64_t k = 0; k < n; ++k) {
                if constexpr (std::is_integral_v<T>) {
                  const auto v = static_cast<uint64_t>(x[at(k)]);
                  total_int = op == Scan::kSum ? total_int + v : total_int * v;
                } else {
                  const Quad v = ref::Num<T>::exact(x[at(k)]);
                  total = op == Scan::kSum ? total + v : total * v;
                }
              }
              for (int64_t k = 1; k < n; ++k) {
                ++checked;
                if (!bit_equal(exc[at(k)], inc[at(k - 1)])) {
                  misses.add(what + ": exclusive[" + std::to_string(k) +
                             "] = " + value_str(exc[at(k)]) + " but inclusive[" +
                             std::to_string(k - 1) + "] = " + value_str(inc[at(k - 1)]));
                }
              }
              if (n == 0) return;
              T want_total;
              if constexpr (std::is_integral_v<T>) {
                want_total = static_cast<T>(static_cast<std::make_unsigned_t<T>>(total_int));
              } else {
                want_total = ref::Num<T>::round(total);
              }
              const T last = inc[at(n - 1)];
              const T first_other = other[at(0)];  // the other direction ends at index at(0)
              if (!bit_equal(last, want_total) || !bit_equal(first_other, want_total)) {
                misses.add(what + ": last inclusive " + value_str(last) + ", other direction " +
                           value_str(first_other) + ", total " + value_str(want_total));
              }
            });
          }
        }
      }
    }
    EXPECT_GT(checked, 1000);
  });
}

// reverse == flip, scan, flip along the axis.
TEST_P(Identities, ReverseIsFlipScanFlip) {
  CUMULUS_SEEDED_RNG(rng);
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    Misses misses("reverse == flip scan flip");
    for (int c = 0; c < 24; ++c) {
      const Shape shape = random_shape(rng, 1 + c % 5, 600, /*short_only=*/true);
      const auto rank = static_cast<int64_t>(shape.size());
      for (const Scan op : {Scan::kSum, Scan::kProd}) {
        const std::vector<T> x = identity_data<T>(rng, op, ref::count_of(shape));
        for (int64_t a = 0; a < rank; ++a) {
          const Lines lines{shape, a};
          auto flip = [&](const std::vector<T>& v) {
            std::vector<T> f(v.size());
            lines.each([&](int64_t base) {
              for (int64_t k = 0; k < lines.n(); ++k) {
                f[static_cast<size_t>(base + k * lines.stride())] =
                    v[static_cast<size_t>(base + (lines.n() - 1 - k) * lines.stride())];
              }
            });
            return f;
          };
          for (const bool exclusive : {false, true}) {
            const bool negative = rng() % 2 != 0;
            const std::vector<T> rev =
                run_scan(op, x, shape, negative ? a - rank : a,
                         {.exclusive = exclusive, .reverse = true}, random_buffers(rng));
            const std::vector<T> fsf =
                flip(run_scan(op, flip(x), shape, negative ? a : a - rank, {.exclusive = exclusive},
                              random_buffers(rng)));
            for (size_t i = 0; i < x.size(); ++i) {
              if (!bit_equal(rev[i], fsf[i])) {
                misses.add(std::string(scan_name(op)) + " shape " + shape_str(shape) + " axis " +
                           std::to_string(a) + " exclusive " + std::to_string(exclusive) +
                           " element " + std::to_string(i) + ": reverse " + value_str(rev[i]) +
                           ", flip-scan-flip " + value_str(fsf[i]));
              }
            }
          }
        }
      }
    }
  });
}

// The first output of an exclusive scan is the identity (0 for CumSum, 1 for CumProd), and with
// an axis of length 1 every output is; a CumProd of ones is ones.
TEST_P(Identities, IdentityElements) {
  CUMULUS_SEEDED_RNG(rng);
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    Misses misses("identity elements");
    for (int c = 0; c < 30; ++c) {
      Shape shape = random_shape(rng, 1 + c % 6, 800);
      const auto rank = static_cast<int64_t>(shape.size());
      const int64_t a = static_cast<int64_t>(rng() % shape.size());
      if (c % 3 == 0) shape[static_cast<size_t>(a)] = 1;
      const Lines lines{shape, a};
      const int64_t axis = rng() % 2 == 0 ? a : a - rank;
      for (const Scan op : {Scan::kSum, Scan::kProd}) {
        const double identity = op == Scan::kSum ? 0 : 1;
        const std::vector<T> x = make_data<T>(rng, ref::count_of(shape), Data::kSum);
        for (const bool reverse : {false, true}) {
          const std::vector<T> y = run_scan(
              op, x, shape, axis, {.exclusive = true, .reverse = reverse}, random_buffers(rng));
          lines.each([&](int64_t base) {
            if (lines.n() == 0) return;
            const int64_t first = reverse ? lines.n() - 1 : 0;
            const T v = y[static_cast<size_t>(base + first * lines.stride())];
            if (as_double(v) != identity) {
              misses.add(std::string(scan_name(op)) + " shape " + shape_str(shape) + " axis " +
                         std::to_string(axis) + " reverse " + std::to_string(reverse) +
                         ": first exclusive output " + value_str(v));
            }
          });
        }
      }
      // CumProd of ones, every attribute combination.
      const std::vector<T> ones(static_cast<size_t>(ref::count_of(shape)), from_double<T>(1));
      for (int k = 0; k < 4; ++k) {
        const ScanOptions o{.exclusive = (k & 1) != 0, .reverse = (k & 2) != 0};
        const std::vector<T> y = run_scan(Scan::kProd, ones, shape, axis, o, random_buffers(rng));
        if (!same_bits(y.data(), ones.data(), ones.size())) {
          misses.add("CumProd of ones, shape " + shape_str(shape) + " axis " +
                     std::to_string(axis) + " exclusive " + std::to_string(o.exclusive) +
                     " reverse " + std::to_string(o.reverse));
        }
      }
    }
  });
}

// The operator pages: "the first element is copied as is". For floats that includes the sign of
// a zero (and any value at all: subnormals, infinities, NaN stays NaN).
TEST_P(Identities, InclusiveFirstElementIsCopiedAsIs) {
  CUMULUS_SEEDED_RNG(rng);
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    const Shape shape{3, 5, 4};
    std::vector<T> x = make_data<T>(rng, ref::count_of(shape), Data::kSum);
    if constexpr (ref::kIsFloat<T>) {
      sprinkle_specials(rng, x);
      for (size_t i = 0; i < x.size(); i += 3) x[i] = from_double<T>(-0.0);
    }
    Misses misses("first inclusive output");
    for (const Scan op : {Scan::kSum, Scan::kProd}) {
      for (int64_t a = 0; a < 3; ++a) {
        const Lines lines{shape, a};
        for (int k = 0; k < 8; ++k) {
          const bool reverse = (k & 1) != 0;
          const Buffers mode = kAllBuffers[k / 2];
          const std::vector<T> y = run_scan(op, x, shape, a, {.reverse = reverse}, mode);
          lines.each([&](int64_t base) {
            const auto i =
                static_cast<size_t>(base + (reverse ? lines.n() - 1 : 0) * lines.stride());
            bool same = ref::bits_of(y[i]) == ref::bits_of(x[i]);
            if constexpr (ref::kIsFloat<T>) {
              same = same || (ref::Num<T>::nan(x[i]) && ref::Num<T>::nan(y[i]));
            }
            if (!same) {
              misses.add(std::string(scan_name(op)) + " axis " + std::to_string(a) + " reverse " +
                         std::to_string(reverse) + " buffers=" + buffers_name(mode) + ": x " +
                         value_str(x[i]) + " (bits " + std::to_string(ref::bits_of(x[i])) +
                         ") came out as " + value_str(y[i]) + " (bits " +
                         std::to_string(ref::bits_of(y[i])) + ")");
            }
          });
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Identities, ::testing::ValuesIn(cumulus::kAllDTypes),
                         dtype_test_name);

// ---------------------------------------------------------------------------------------------
// Sum: 1-16 inputs with random broadcasting, left to right, rounded once.

// A random output shape of rank 0-5 and `count` input shapes that broadcast to (part of) it:
// each drops some leading dimensions and turns random dimensions into 1.
std::vector<Shape> random_broadcast_shapes(Rng& rng, int count, int64_t budget) {
  static constexpr int64_t kDims[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 255, 256, 257};
  const auto rank = static_cast<size_t>(rng() % 6);
  Shape out(rank);
  for (int64_t& d : out) d = kDims[rng() % std::size(kDims)];
  while (ref::count_of(out) > budget) *std::max_element(out.begin(), out.end()) = 1 + rng() % 3;
  if (rank > 0 && rng() % 16 == 0) out[rng() % rank] = 0;
  std::vector<Shape> shapes;
  for (int k = 0; k < count; ++k) {
    const size_t drop = rng() % 2 == 0 ? 0 : rng() % (rank + 1);
    Shape s(out.begin() + static_cast<std::ptrdiff_t>(drop), out.end());
    for (int64_t& d : s) {
      if (rng() % 3 == 0) d = 1;
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

// Runs Sum with the chosen buffers and returns the output. In place needs an input of the
// output's shape; without one the output is a separate buffer, and `used` says which it was.
template <class T>
std::vector<T> run_sum(const std::vector<std::vector<T>>& inputs, const std::vector<Shape>& shapes,
                       const Shape& out_shape, Buffers mode, Buffers* used = nullptr) {
  if (used != nullptr) *used = mode;
  constexpr DType kType = cumulus::dtype_of<T>;
  const auto n = static_cast<size_t>(ref::count_of(out_shape));
  // Copies of the inputs, one element into their allocations when misaligned.
  const size_t offset = mode == Buffers::kMisaligned ? 1 : 0;
  std::vector<std::vector<T>> storage;
  std::vector<ConstTensorView> views;
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::vector<T> s(inputs[k].size() + 2);
    std::copy(inputs[k].begin(), inputs[k].end(), s.begin() + static_cast<std::ptrdiff_t>(offset));
    storage.push_back(std::move(s));
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    views.emplace_back(kType, shapes[k], storage[k].data() + offset);
  }
  if (mode == Buffers::kAllocating) {
    const Tensor y = cumulus::sum(views);
    EXPECT_EQ(y.shape(), out_shape);
    if (y.dtype() != kType || y.size() != static_cast<int64_t>(n)) return std::vector<T>(n);
    return {y.data<T>(), y.data<T>() + n};
  }
  if (mode == Buffers::kInPlace) {
    // y is an input with the output's shape, when there is one; the last such one, so that
    // earlier reads of other inputs and later reads of this one are both exercised.
    for (size_t k = inputs.size(); k-- > 0;) {
      if (shapes[k] == out_shape) {
        cumulus::sum(views, TensorView{kType, shapes[k], storage[k].data()});
        return {storage[k].begin(), storage[k].begin() + static_cast<std::ptrdiff_t>(n)};
      }
    }
    if (used != nullptr) *used = Buffers::kSeparate;
  }
  std::vector<T> ys(n + 2);
  fill_poison(ys.data(), n + 2);
  cumulus::sum(views, TensorView{kType, out_shape, ys.data() + offset});
  std::vector<T> poison(1);
  fill_poison(poison.data(), 1);
  EXPECT_TRUE(same_bits(&ys[n + offset], poison.data(), 1)) << "wrote past the output";
  if (offset != 0) {
    EXPECT_TRUE(same_bits(&ys[0], poison.data(), 1)) << "wrote before the output";
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    EXPECT_TRUE(same_bits(storage[k].data() + offset, inputs[k].data(), inputs[k].size()))
        << "input " << k << " modified";
  }
  return {ys.begin() + static_cast<std::ptrdiff_t>(offset),
          ys.begin() + static_cast<std::ptrdiff_t>(offset + n)};
}

template <class T>
bool has_nan_or_inf(const std::vector<std::vector<T>>& inputs) {
  for (const std::vector<T>& v : inputs) {
    for (const T e : v) {
      if (!std::isfinite(ref::Num<T>::to_double(e))) return true;
    }
  }
  return false;
}

// Which arrangements of buffers ran a Sum with a NaN or an infinity among its inputs, and which
// without; a test that draws both at random requires all eight.
class SumCoverage {
 public:
  void add(Buffers used, bool specials) { ++counts_[static_cast<size_t>(used) * 2 + specials]; }
  // Only the finite cells when the data had no special values to offer.
  void expect_all_reached(bool with_specials = true) const {
    for (const Buffers mode : kAllBuffers) {
      for (const bool specials : {false, true}) {
        if (specials && !with_specials) continue;
        EXPECT_GT(counts_[static_cast<size_t>(mode) * 2 + specials], 0)
            << "no Sum with buffers=" << buffers_name(mode)
            << (specials ? " and NaN or infinite inputs" : " and finite inputs");
      }
    }
  }

 private:
  std::array<int64_t, 8> counts_{};
};

// Sum is exact: each output is the exact sum of its terms (exact.h, sharing nothing with
// reference.h or the library) rounded once, as bits; broadcast as ref::sum_float does.
template <class T>
constexpr exact::Format kExactFormat = std::is_same_v<T, float>     ? exact::kBinary32
                                       : std::is_same_v<T, double>  ? exact::kBinary64
                                       : std::is_same_v<T, Float16> ? exact::kBinary16
                                                                    : exact::kBFloat16;
template <class T>
bool nan_bits(uint64_t b) {
  constexpr exact::Format f = kExactFormat<T>;
  const uint64_t inf = ((uint64_t{1} << f.exp_bits) - 1) << (f.precision - 1);
  return (b & ((uint64_t{1} << (f.exp_bits + f.precision - 1)) - 1)) > inf;
}
template <class T>
std::vector<uint64_t> exact_sum_bits(const std::vector<std::vector<T>>& inputs,
                                     const std::vector<Shape>& shapes, const Shape& out) {
  std::vector<uint64_t> y(static_cast<size_t>(ref::count_of(out)));
  if (y.empty()) return y;
  std::vector<Shape> strides;
  for (const Shape& s : shapes) strides.push_back(ref::row_major_strides(s));
  Shape index(out.size(), 0);
  size_t flat = 0;
  do {
    exact::Sum sum;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const size_t pad = out.size() - shapes[k].size();
      int64_t offset = 0;
      for (size_t d = 0; d < shapes[k].size(); ++d) {
        if (shapes[k][d] != 1) offset += index[pad + d] * strides[k][d];
      }
      sum.add(ref::Num<T>::to_double(inputs[k][static_cast<size_t>(offset)]));
    }
    y[flat++] = sum.round_bits(kExactFormat<T>);
  } while (ref::next_index(index, out, -1));
  return y;
}

// Runs one Sum with the buffers drawn at random, checks it against the reference, records what
// ran in `coverage` and returns the number of output elements.
template <class T>
int64_t check_sum(Rng& rng, const std::vector<std::vector<T>>& inputs,
                  const std::vector<Shape>& shapes, SumCoverage& coverage) {
  const std::optional<Shape> out_shape = ref::broadcast_shapes(shapes);
  EXPECT_TRUE(out_shape.has_value());
  if (!out_shape) return 0;
  std::vector<ConstTensorView> views;
  for (size_t k = 0; k < shapes.size(); ++k) {
    views.emplace_back(cumulus::dtype_of<T>, shapes[k], inputs[k].data());
  }
  EXPECT_EQ(cumulus::sum_shape(views), *out_shape);
  Buffers used{};
  const std::vector<T> got = run_sum(inputs, shapes, *out_shape, random_buffers(rng), &used);
  const std::vector<uint64_t> want = exact_sum_bits(inputs, shapes, *out_shape);
  std::string what = std::string(cumulus::dtype_name(cumulus::dtype_of<T>)) + " Sum of";
  for (const Shape& s : shapes) what += " " + shape_str(s);
  Misses misses(what + " -> " + shape_str(*out_shape) + " buffers=" + buffers_name(used));
  for (size_t i = 0; i < got.size(); ++i) {
    const auto bits = static_cast<uint64_t>(ref::bits_of(got[i]));
    if (bits == want[i] || (ref::Num<T>::nan(got[i]) && nan_bits<T>(want[i]))) continue;
    char text[96];
    std::snprintf(text, sizeof text, "expected bits %#llx, got %#llx",
                  static_cast<unsigned long long>(want[i]), static_cast<unsigned long long>(bits));
    misses.add("element " + std::to_string(i) + ": " + text);
  }
  if (!got.empty()) coverage.add(used, has_nan_or_inf(inputs));
  return static_cast<int64_t>(got.size());
}

class SumProperty : public ::testing::TestWithParam<DType> {};

// Buffers and special values drawn independently: NaN and infinities reach every arrangement
// (allocating, into a given output, misaligned, in place over an input).
TEST_P(SumProperty, RandomBroadcastMatchesReference) {
  CUMULUS_SEEDED_RNG(rng);
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    if constexpr (ref::kIsFloat<T>) {
      int64_t elements = 0;
      SumCoverage coverage;
      for (int c = 0; c < 160; ++c) {
        const int count = 1 + static_cast<int>(rng() % 16);
        const std::vector<Shape> shapes = random_broadcast_shapes(rng, count, 1500);
        const bool specials = rng() % 3 == 0;
        std::vector<std::vector<T>> inputs;
        for (const Shape& s : shapes) {
          inputs.push_back(make_data<T>(rng, ref::count_of(s), Data::kSum));
          if (specials) sprinkle_specials(rng, inputs.back());
        }
        elements += check_sum(rng, inputs, shapes, coverage);
      }
      coverage.expect_all_reached();
      EXPECT_GT(elements, 10000);
    }
  });
}

// Inputs on one grid (see exact_grid): every sum of them, in any order, is exact in double, so
// the output must be the exact sum rounded once, bit for bit, on every path, with signed zeros,
// infinities and NaN among the inputs or not.
TEST_P(SumProperty, ExactDataRoundsOnceBitForBit) {
  CUMULUS_SEEDED_RNG(rng);
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    if constexpr (ref::kIsFloat<T>) {
      int64_t elements = 0;
      SumCoverage coverage;
      for (int c = 0; c < 200; ++c) {
        const int count = 1 + static_cast<int>(rng() % 16);
        const std::vector<Shape> shapes = random_broadcast_shapes(rng, count, 1500);
        const ExactGrid grid = exact_grid<T>(rng, count);
        const bool specials = rng() % 3 == 0;
        std::vector<std::vector<T>> inputs;
        for (const Shape& s : shapes) {
          inputs.push_back(exact_sum_data<T>(rng, grid, ref::count_of(s)));
          if (specials) sprinkle_exact_specials(rng, inputs.back());
        }
        elements += check_sum(rng, inputs, shapes, coverage);
      }
      coverage.expect_all_reached();
      EXPECT_GT(elements, 10000);
    }
  });
}

// Sum(x) == x, bit for bit (signed zeros, infinities, subnormals included); NaN stays NaN.
TEST_P(SumProperty, SumOfOneInputIsTheInput) {
  CUMULUS_SEEDED_RNG(rng);
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    if constexpr (ref::kIsFloat<T>) {
      for (const Shape& shape : {Shape{}, Shape{1}, Shape{37}, Shape{3, 0, 2}, Shape{4, 17, 9}}) {
        std::vector<T> x = make_data<T>(rng, ref::count_of(shape), Data::kSum);
        sprinkle_specials(rng, x);
        if (!x.empty()) x[0] = from_double<T>(-0.0);
        const ConstTensorView view(cumulus::dtype_of<T>, shape, x.data());
        const Tensor y = cumulus::sum(std::span<const ConstTensorView>(&view, 1));
        ASSERT_EQ(y.shape(), shape);
        for (size_t i = 0; i < x.size(); ++i) {
          const T got = y.data<T>()[i];
          if (ref::Num<T>::nan(x[i])) {
            EXPECT_TRUE(ref::Num<T>::nan(got)) << "element " << i;
          } else {
            EXPECT_EQ(ref::bits_of(got), ref::bits_of(x[i]))
                << "shape " << shape_str(shape) << " element " << i << ": " << value_str(x[i])
                << " came out as " << value_str(got);
          }
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Floats, SumProperty,
                         ::testing::Values(DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                           DType::kBFloat16),
                         dtype_test_name);

// The vector kernels narrow double sums to float16 and bfloat16 by their own bit operations; a
// Sum of three halves gives them doubles of every kind: ties and near-ties (b is half a step of
// a, c nudges it), subnormal results, overflow, NaN and infinities. Every result must be the
// exact sum a + b + c (exact.h) rounded once, to nearest even; for float16 that is the double sum.
class HalfNarrowing : public ::testing::TestWithParam<DType> {};

TEST_P(HalfNarrowing, SumsRoundOnceToNearestEven) {
  CUMULUS_SEEDED_RNG(rng);
  const bool is_f16 = GetParam() == DType::kFloat16;
  const ref::HalfFormat f = is_f16 ? ref::kBinary16 : ref::kBFloat16;
  const auto pattern = [&](double v) { return ref::round_to(f, v); };
  std::vector<uint16_t> a, b, c;
  const auto add = [&](uint16_t x, uint16_t y, uint16_t z) {
    a.push_back(x);
    b.push_back(y);
    c.push_back(z);
  };
  for (uint32_t x = 0; x < 0x10000; ++x) {
    const double v = ref::decode(f, static_cast<uint16_t>(x));
    if (!std::isfinite(v) || v == 0) {
      add(static_cast<uint16_t>(x), static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng()));
      continue;
    }
    // Half a step of v (at v's exponent), exactly representable for most v; then a nudge of a
    // few steps further down, either sign.
    const int exponent = std::ilogb(v) - f.mant_bits - 1;
    const uint16_t half_step = pattern(std::ldexp(v < 0 ? -1.0 : 1.0, exponent));
    const uint16_t nudge = pattern(std::ldexp((rng() % 2) ? 1.0 : -1.0, exponent - 3 - rng() % 12));
    add(static_cast<uint16_t>(x), half_step, static_cast<uint16_t>(rng() % 2 ? 0 : nudge));
    add(static_cast<uint16_t>(x), static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng()));
  }
  const Shape shape{static_cast<int64_t>(a.size())};
  const ConstTensorView inputs[] = {ConstTensorView(GetParam(), shape, a.data()),
                                    ConstTensorView(GetParam(), shape, b.data()),
                                    ConstTensorView(GetParam(), shape, c.data())};
  const Tensor y = cumulus::sum(inputs);
  const auto* got = static_cast<const uint16_t*>(y.raw());
  Misses misses(is_f16 ? "float16 narrowing" : "bfloat16 narrowing");
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double sum = (ref::decode(f, a[i]) + ref::decode(f, b[i])) + ref::decode(f, c[i]);
    exact::Sum exact_sum;
    for (const uint16_t t : {a[i], b[i], c[i]}) exact_sum.add(ref::decode(f, t));
    const auto want =
        static_cast<uint16_t>(exact_sum.round_bits(is_f16 ? exact::kBinary16 : exact::kBFloat16));
    const bool same = ref::half_is_nan(f, want) ? ref::half_is_nan(f, got[i]) : got[i] == want;
    if (!same) {
      char text[160];
      std::snprintf(text, sizeof text, "%04x + %04x + %04x = %.17g: got %04x, want %04x", a[i],
                    b[i], c[i], sum, got[i], want);
      misses.add(text);
    }
  }
  EXPECT_EQ(misses.count(), 0);

  // Sums of halves are exact below the normal range; products are not. Rows [a, b, 1 x 6]
  // scanned by CumProd (eight at a time, so through the vector kernels) give a * b (exact in
  // double) around and below the smallest normal, rounded once, in elements 1 to 7.
  const uint16_t one_bits = pattern(1.0);
  std::vector<uint16_t> rows_data;
  const int low = is_f16 ? -27 : -140;
  const int high = is_f16 ? -12 : -120;
  for (int i = 0; i < 100000; ++i) {
    const int target = low + static_cast<int>(rng() % static_cast<uint64_t>(high - low + 1));
    const int ea = is_f16 ? -8 + static_cast<int>(rng() % 5) : -70 + static_cast<int>(rng() % 11);
    const double step = std::ldexp(1.0, -f.mant_bits);
    const double ma = 1 + static_cast<double>(rng() % (1u << f.mant_bits)) * step;
    const double mb = 1 + static_cast<double>(rng() % (1u << f.mant_bits)) * step;
    const double sign = rng() % 2 ? -1.0 : 1.0;
    rows_data.push_back(pattern(sign * std::ldexp(ma, ea)));
    rows_data.push_back(pattern(std::ldexp(mb, target - ea)));
    rows_data.insert(rows_data.end(), 6, one_bits);
  }
  const Shape rows{static_cast<int64_t>(rows_data.size() / 8), 8};
  const Tensor products = cumulus::cumprod(ConstTensorView(GetParam(), rows, rows_data.data()), 1);
  const auto* p = static_cast<const uint16_t*>(products.raw());
  Misses product_misses(is_f16 ? "float16 products" : "bfloat16 products");
  for (std::size_t i = 0; i < rows_data.size(); i += 8) {
    const double product = ref::decode(f, rows_data[i]) * ref::decode(f, rows_data[i + 1]);
    const uint16_t want = pattern(product);
    bool same = p[i] == rows_data[i];
    for (std::size_t k = 1; k < 8; ++k) same = same && p[i + k] == want;
    if (!same) {
      char text[160];
      std::snprintf(text, sizeof text, "%04x * %04x = %.17g: got %04x, want %04x", rows_data[i],
                    rows_data[i + 1], product, p[i + 1], want);
      product_misses.add(text);
    }
  }
  EXPECT_EQ(product_misses.count(), 0);
}

INSTANTIATE_TEST_SUITE_P(Halves, HalfNarrowing,
                         ::testing::Values(DType::kFloat16, DType::kBFloat16), dtype_test_name);

std::vector<ConstTensorView> zero_views(const std::vector<Shape>& shapes, const void* data,
                                        DType t = DType::kFloat32) {
  std::vector<ConstTensorView> views;
  for (const Shape& s : shapes) views.emplace_back(t, s, data);
  return views;
}

TEST(SumShape, IsNumPyBroadcastShape) {
  static const float kZeros[4096] = {};
  const struct {
    std::vector<Shape> in;
    std::optional<Shape> out;
  } cases[] = {
      {{{}, {2, 3}}, Shape{2, 3}},
      {{{2, 3}, {}}, Shape{2, 3}},
      {{{1}, {}}, Shape{1}},
      {{{}}, Shape{}},
      {{{0}, {1}}, Shape{0}},
      {{{2, 1, 4}, {3, 1}}, Shape{2, 3, 4}},
      {{{5, 1, 0}, {1, 7, 1}}, Shape{5, 7, 0}},
      {{{1, 1}, {1}, {3, 1, 1}}, Shape{3, 1, 1}},
      {{{0}, {2}}, std::nullopt},
      {{{2, 3}, {3, 2}}, std::nullopt},
      {{{4}, {1}, {3}}, std::nullopt},
  };
  for (const auto& c : cases) {
    std::string what;
    for (const Shape& s : c.in) what += shape_str(s) + " ";
    EXPECT_EQ(ref::broadcast_shapes(c.in), c.out) << what;  // the reference agrees with NumPy
    const auto views = zero_views(c.in, kZeros);
    if (c.out) {
      EXPECT_EQ(cumulus::sum_shape(views), *c.out) << what;
    } else {
      EXPECT_THROW(cumulus::sum_shape(views), cumulus::Error) << what;
      Tensor y(DType::kFloat32, {2, 3});
      EXPECT_THROW(cumulus::sum(views, y.view()), cumulus::Error) << what;
    }
  }
  CUMULUS_SEEDED_RNG(rng);
  for (int c = 0; c < 300; ++c) {
    std::vector<Shape> shapes = random_broadcast_shapes(rng, 1 + static_cast<int>(rng() % 5), 4096);
    if (c % 3 == 0) {  // perturb one dimension: usually incompatible afterwards
      Shape& s = shapes[rng() % shapes.size()];
      if (!s.empty()) s[rng() % s.size()] += 1 + static_cast<int64_t>(rng() % 3);
    }
    bool fits = true;
    for (const Shape& s : shapes) fits = fits && ref::count_of(s) <= 4096;
    if (!fits) continue;
    const auto want = ref::broadcast_shapes(shapes);
    const auto views = zero_views(shapes, kZeros);
    std::string what;
    for (const Shape& s : shapes) what += shape_str(s) + " ";
    if (want) {
      EXPECT_EQ(cumulus::sum_shape(views), *want) << what;
    } else {
      EXPECT_THROW(cumulus::sum_shape(views), cumulus::Error) << what;
    }
  }
}

// Sum-1 and Sum-6 semantics: equal shapes only.
TEST(SumShape, NoBroadcastRejectsUnequalShapes) {
  static const float kData[64] = {1, 2, 3, 4, 5, 6};
  const cumulus::SumOptions no_broadcast{.broadcast = false};
  for (const std::vector<Shape>& shapes :
       {std::vector<Shape>{{2, 3}, {1, 3}}, std::vector<Shape>{{3}, {2, 3}},
        std::vector<Shape>{{2, 3}, {}}, std::vector<Shape>{{2, 3}, {2, 3}, {3, 2}},
        std::vector<Shape>{{1}, {1, 1}}}) {
    const auto views = zero_views(shapes, kData);
    std::string what;
    for (const Shape& s : shapes) what += shape_str(s) + " ";
    EXPECT_THROW(cumulus::sum_shape(views, no_broadcast), cumulus::Error) << what;
    Tensor y(DType::kFloat32, {2, 3});
    EXPECT_THROW(cumulus::sum(views, y.view(), no_broadcast), cumulus::Error) << what;
    EXPECT_THROW(cumulus::sum(views, no_broadcast), cumulus::Error) << what;
  }
  const std::vector<Shape> equal{{2, 3}, {2, 3}, {2, 3}};
  const auto views = zero_views(equal, kData);
  EXPECT_EQ(cumulus::sum_shape(views, no_broadcast), (Shape{2, 3}));
  const Tensor y = cumulus::sum(views, no_broadcast);
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.data<float>()[i], 3 * kData[i]);
}

// ---------------------------------------------------------------------------------------------
// The comparisons themselves: what no tolerance may excuse.

template <class T>
T from_bits(uint64_t b) {
  auto bits = ref::bits_of(T{});
  bits = static_cast<decltype(bits)>(b);
  T v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

template <class T>
void check_comparison_rules() {
  const double inf_d = std::numeric_limits<double>::infinity();
  const T plus_zero = from_double<T>(0.0), minus_zero = from_double<T>(-0.0);
  const T inf = from_double<T>(inf_d), minus_inf = from_double<T>(-inf_d);
  const T nan = from_double<T>(std::numeric_limits<double>::quiet_NaN());
  const T max = from_bits<T>(ref::bits_of(inf) - 1u);
  const T below_max = from_bits<T>(ref::bits_of(inf) - 2u);
  const T one = from_double<T>(1.0), after_one = from_bits<T>(ref::bits_of(one) + 1u);
  const T tiny = ref::Num<T>::smallest_subnormal();
  using ref::kNoMatch;
  using ref::ulp_distance;
  EXPECT_EQ(ulp_distance(plus_zero, minus_zero), kNoMatch);
  EXPECT_EQ(ulp_distance(minus_zero, minus_zero), 0);
  EXPECT_EQ(ulp_distance(inf, max), kNoMatch);
  EXPECT_EQ(ulp_distance(inf, minus_inf), kNoMatch);
  EXPECT_EQ(ulp_distance(minus_inf, minus_inf), 0);
  EXPECT_EQ(ulp_distance(nan, nan), 0);
  EXPECT_EQ(ulp_distance(nan, plus_zero), kNoMatch);
  EXPECT_EQ(ulp_distance(inf, nan), kNoMatch);
  EXPECT_EQ(ulp_distance(max, below_max), 1);
  EXPECT_EQ(ulp_distance(one, after_one), 1);
  EXPECT_EQ(ulp_distance(minus_zero, tiny), 1);
  EXPECT_EQ(ulp_distance(plus_zero, tiny), 1);

  const auto exact = [](T v) {
    const Quad q = ref::Num<T>::exact(v);
    return ref::Exact{q, ref::abs(q), 1};
  };
  // Misses for every type, tolerance or not.
  EXPECT_NE(ref::check_float(plus_zero, exact(minus_zero)), "");
  EXPECT_NE(ref::check_float(minus_zero, exact(plus_zero)), "");
  EXPECT_NE(ref::check_float(max, exact(inf)), "");
  EXPECT_NE(ref::check_float(inf, exact(max)), "");
  EXPECT_NE(ref::check_float(minus_inf, exact(inf)), "");
  EXPECT_NE(ref::check_float(nan, exact(inf)), "");
  EXPECT_NE(ref::check_float(plus_zero, exact(nan)), "");
  // Within the tolerance.
  EXPECT_EQ(ref::check_float(minus_zero, exact(minus_zero)), "");
  EXPECT_EQ(ref::check_float(inf, exact(inf)), "");
  EXPECT_EQ(ref::check_float(nan, exact(nan)), "");
  EXPECT_EQ(ref::check_float(after_one, exact(one)), "");
  // Bit for bit: one ulp is a miss too.
  EXPECT_NE(ref::check_float_exact(after_one, exact(one)), "");
  EXPECT_NE(ref::check_float_exact(plus_zero, exact(minus_zero)), "");
  EXPECT_NE(ref::check_float_exact(max, exact(inf)), "");
  EXPECT_EQ(ref::check_float_exact(one, exact(one)), "");
  EXPECT_EQ(ref::check_float_exact(minus_zero, exact(minus_zero)), "");
  EXPECT_EQ(ref::check_float_exact(nan, exact(nan)), "");
}

TEST(Comparison, SignedZerosInfinitiesAndNaNAreNeverWithinTolerance) {
  check_comparison_rules<float>();
  check_comparison_rules<double>();
  check_comparison_rules<Float16>();
  check_comparison_rules<BFloat16>();
}

// ---------------------------------------------------------------------------------------------
// Signed zeros. IEEE 754, rounding to nearest: x + y is -0 when both are -0 and +0 when the exact
// sum of non-zero values of opposite signs cancels (or one zero is +0); a product's sign is the
// product of the signs. So a sum of zeros is -0 exactly when every term is -0, and the empty sum,
// an exclusive scan's first output (0 on the operator pages), is +0. The reference is held to
// hand-worked cases; the library to the reference, on data full of zeros.

struct ZeroCase {
  Scan op;
  bool exclusive;
  bool reverse;
  std::vector<double> x;
  std::vector<double> want;
};

template <class T>
void check_reference_zero_signs() {
  const double p = 0.0, m = -0.0;
  const ZeroCase scans[] = {
      {Scan::kSum, false, false, {m, m, p, m}, {m, m, p, p}},
      {Scan::kSum, true, false, {m, m, p, m}, {p, m, m, p}},
      {Scan::kSum, false, true, {m, m, p, m}, {p, p, p, m}},
      {Scan::kSum, true, true, {m, m, p, m}, {p, p, m, p}},
      {Scan::kSum, false, false, {1, -1, m}, {1, p, p}},
      {Scan::kSum, false, false, {-1, 1, m, m}, {-1, p, p, p}},
      {Scan::kSum, false, false, {m, 1, -1}, {m, 1, p}},
      {Scan::kSum, true, false, {m, 2, -2, m}, {p, m, 2, p}},
      {Scan::kProd, false, false, {m, 2, -3}, {m, m, p}},
      {Scan::kProd, true, false, {m, 2, -3}, {1, m, m}},
      {Scan::kProd, false, false, {-1, p, -1, m}, {-1, m, p, m}},
      {Scan::kProd, false, true, {-1, p, -1, m}, {m, p, p, m}},
      {Scan::kProd, true, true, {-1, p, -1, m}, {p, p, m, 1}},
  };
  const auto to_t = [](const std::vector<double>& d) {
    std::vector<T> v;
    for (const double e : d) v.push_back(from_double<T>(e));
    return v;
  };
  const auto same = [](T a, double b) {
    return ref::bits_of(a) == ref::bits_of(from_double<T>(b));
  };
  for (const ZeroCase& c : scans) {
    const std::vector<T> x = to_t(c.x);
    const std::vector<ref::Exact> y =
        ref::scan_float(c.op, x, {static_cast<int64_t>(x.size())}, 0, c.exclusive, c.reverse);
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_TRUE(same(ref::Num<T>::round(y[i].value), c.want[i]))
          << scan_name(c.op) << " exclusive=" << c.exclusive << " reverse=" << c.reverse
          << " element " << i << ": the reference gives "
          << value_str(ref::Num<T>::round(y[i].value)) << " (sign " << ref::sign_bit(y[i].value)
          << "), IEEE gives " << c.want[i];
    }
  }
  const std::pair<std::vector<double>, double> sums[] = {
      {{m}, m},     {{m, m}, m},     {{m, p}, p},    {{p, m}, p},
      {{1, -1}, p}, {{-1, 1, m}, p}, {{m, m, m}, m}, {{m, 1, -1, m}, p},
  };
  for (const auto& [terms, want] : sums) {
    std::vector<std::vector<T>> inputs;
    for (const double t : terms) inputs.push_back(to_t({t}));
    const std::vector<Shape> shapes(inputs.size(), Shape{1});
    const std::vector<ref::Exact> y = ref::sum_float(inputs, shapes, {1});
    EXPECT_TRUE(same(ref::Num<T>::round(y[0].value), want))
        << "Sum of " << terms.size() << " terms: the reference gives "
        << value_str(ref::Num<T>::round(y[0].value)) << ", IEEE gives " << want;
  }
  // A non-zero exact value that rounds to zero keeps its sign.
  const Quad tiny = static_cast<Quad>(std::ldexp(1.0, -1000)) * std::ldexp(1.0, -100);
  EXPECT_TRUE(same(ref::Num<T>::round(-tiny), m));
  EXPECT_TRUE(same(ref::Num<T>::round(tiny), p));
}

TEST(ReferenceSignedZeros, FollowIeee) {
  check_reference_zero_signs<float>();
  check_reference_zero_signs<double>();
  check_reference_zero_signs<Float16>();
  check_reference_zero_signs<BFloat16>();
}

// Zeros of both signs, mostly -0 (so long runs of -0 end in +0), now and then +-1 that cancel to
// +0; for products +-1 with some zeros. Every result is exact.
template <class T>
std::vector<T> zero_data(Rng& rng, Scan op, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (T& e : v) {
    const uint64_t r = rng() % 16;
    const double sign = rng() % 2 != 0 ? -1.0 : 1.0;
    if (op == Scan::kSum) {
      e = from_double<T>(r < 13 ? -0.0 : r < 15 ? 0.0 : sign);
    } else {
      e = from_double<T>(r < 14 ? sign : sign * 0.0);
    }
  }
  return v;
}

class SignedZeros : public ::testing::TestWithParam<DType> {};

// The whole cross product of buffers, attributes and axis spelling, three times over for each
// operator; then Sum on every arrangement of buffers.
TEST_P(SignedZeros, LibraryMatchesReference) {
  CUMULUS_SEEDED_RNG(rng);
  cumulus::visit_dtype(GetParam(), [&]<class T>(T) {
    if constexpr (ref::kIsFloat<T>) {
      int64_t wrong = 0;
      for (int round = 0; round < 3; ++round) {
        for (const Buffers mode : kAllBuffers) {
          for (int k = 0; k < 8; ++k) {
            const ScanOptions o{.exclusive = (k & 1) != 0, .reverse = (k & 2) != 0};
            const bool negative = (k & 4) != 0;
            for (const Scan op : {Scan::kSum, Scan::kProd}) {
              const Shape shape = random_shape(rng, 1 + static_cast<int>(rng() % 4), 1200);
              const auto rank = static_cast<int64_t>(shape.size());
              const auto a = static_cast<int64_t>(rng() % shape.size());
              const std::vector<T> x = zero_data<T>(rng, op, ref::count_of(shape));
              wrong +=
                  check_scan(op, x, shape, negative ? a - rank : a, o, mode, Compare::kBitForBit);
            }
          }
        }
      }
      EXPECT_EQ(wrong, 0);
      SumCoverage coverage;
      for (int c = 0; c < 100; ++c) {
        const int count = 1 + static_cast<int>(rng() % 8);
        const std::vector<Shape> shapes = random_broadcast_shapes(rng, count, 1500);
        std::vector<std::vector<T>> inputs;
        for (const Shape& s : shapes)
          inputs.push_back(zero_data<T>(rng, Scan::kSum, ref::count_of(s)));
        check_sum(rng, inputs, shapes, coverage);
      }
      coverage.expect_all_reached(/*with_specials=*/false);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Floats, SignedZeros,
                         ::testing::Values(DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                           DType::kBFloat16),
                         dtype_test_name);

// ---------------------------------------------------------------------------------------------
// Thread-count independence: identical bits for 1, 2, 3 and 8 threads.

class ThreadCount : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = cumulus::num_threads(); }
  void TearDown() override { cumulus::set_num_threads(saved_); }

  // Runs run(y) with 1 thread and then 2, 3 and 8, into the same (reused) output buffer, and
  // requires the same bytes every time.
  template <class Run>
  void expect_same_for_all_counts(const char* what, DType t, const Shape& shape, Run run) {
    Tensor y(t, shape);
    cumulus::set_num_threads(1);
    run(y.view());
    const std::vector<std::byte> first(static_cast<const std::byte*>(y.raw()),
                                       static_cast<const std::byte*>(y.raw()) + y.nbytes());
    for (const int n : {2, 3, 8}) {
      std::memset(y.raw(), 0xA5, y.nbytes());
      cumulus::set_num_threads(n);
      run(y.view());
      EXPECT_EQ(std::memcmp(y.raw(), first.data(), first.size()), 0)
          << what << ": " << n << " threads differ from 1 thread";
    }
  }

 private:
  int saved_ = 1;
};

TEST_F(ThreadCount, ResultsAreBitwiseIdentical) {
  CUMULUS_SEEDED_RNG(rng);
  const Shape shape{64, 100003};
  const auto count = static_cast<size_t>(ref::count_of(shape));
  std::vector<float> x(count);
  for (float& v : x) v = static_cast<float>(uniform(rng, -1, 1));
  std::vector<float> p(count);
  for (float& v : p) v = static_cast<float>(std::exp2(uniform(rng, -1, 1)));
  std::vector<Float16> h(count);  // finite halves in [-1, 1], drawn by bit pattern
  for (Float16& v : h) v.bits = static_cast<uint16_t>((rng() % 0x3C01) | (rng() % 2 << 15));
  const ConstTensorView xv(DType::kFloat32, shape, x.data());
  const ConstTensorView pv(DType::kFloat32, shape, p.data());
  const ConstTensorView hv(DType::kFloat16, shape, h.data());
  const DType f32 = DType::kFloat32;

  expect_same_for_all_counts("f32 CumSum axis 1", f32, shape,
                             [&](TensorView y) { cumulus::cumsum(xv, 1, y); });
  expect_same_for_all_counts("f32 CumSum axis 0", f32, shape,
                             [&](TensorView y) { cumulus::cumsum(xv, 0, y); });
  expect_same_for_all_counts("f32 CumSum axis -1 exclusive reverse", f32, shape, [&](TensorView y) {
    cumulus::cumsum(xv, -1, y, {.exclusive = true, .reverse = true});
  });
  expect_same_for_all_counts("f32 CumProd axis 0", f32, shape,
                             [&](TensorView y) { cumulus::cumprod(pv, 0, y); });
  expect_same_for_all_counts("f16 CumSum axis 1", DType::kFloat16, shape,
                             [&](TensorView y) { cumulus::cumsum(hv, 1, y); });

  const Shape row{100003};
  const Shape column{64, 1};
  const ConstTensorView sum_inputs[] = {xv, ConstTensorView(f32, row, p.data()),
                                        ConstTensorView(f32, column, x.data() + 7)};
  expect_same_for_all_counts("f32 Sum of 3 broadcast", f32, shape,
                             [&](TensorView y) { cumulus::sum(sum_inputs, y); });
  const ConstTensorView full_inputs[] = {xv, pv, xv};
  expect_same_for_all_counts("f32 Sum of 3 equal shapes", f32, shape,
                             [&](TensorView y) { cumulus::sum(full_inputs, y); });

  // And the answers are right: rows and columns against the reference.
  cumulus::set_num_threads(8);
  const Tensor by_row = cumulus::cumsum(xv, 1);
  const Tensor by_column = cumulus::cumsum(xv, 0);
  Misses misses("large f32 CumSum");
  for (const int64_t r : {int64_t{0}, int64_t{33}, int64_t{63}}) {
    const std::vector<float> line(x.begin() + r * 100003, x.begin() + (r + 1) * 100003);
    const auto want = ref::scan_float(Scan::kSum, line, {100003}, 0, false, false);
    for (size_t i = 0; i < line.size(); ++i) {
      const std::string miss =
          ref::check_float(by_row.data<float>()[r * 100003 + static_cast<int64_t>(i)], want[i]);
      if (!miss.empty())
        misses.add("row " + std::to_string(r) + " element " + std::to_string(i) + ": " + miss);
    }
  }
  for (const int64_t col : {int64_t{0}, int64_t{4095}, int64_t{50001}, int64_t{100002}}) {
    std::vector<float> line;
    for (int64_t r = 0; r < 64; ++r) line.push_back(x[static_cast<size_t>(r * 100003 + col)]);
    const auto want = ref::scan_float(Scan::kSum, line, {64}, 0, false, false);
    for (size_t i = 0; i < line.size(); ++i) {
      const std::string miss = ref::check_float(
          by_column.data<float>()[static_cast<int64_t>(i) * 100003 + col], want[i]);
      if (!miss.empty())
        misses.add("column " + std::to_string(col) + " row " + std::to_string(i) + ": " + miss);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// A child forked after the pool's workers started has none of them (fork copies only the calling
// thread). Its scans on several threads must still finish, with the parent's bits, on a pool of
// its own of the same size, not wait for workers it lacks. Not under ThreadSanitizer's filter
// (ThreadCount*): it does not support threads started after a multi-threaded fork.

TEST(ForkedChild, ScansOnAPoolOfItsOwn) {
  const int saved = cumulus::num_threads();
  cumulus::set_num_threads(2);
  CUMULUS_SEEDED_RNG(rng);
  const Shape shape{1 << 20};  // a long row: shared between the threads
  std::vector<float> x(static_cast<size_t>(shape[0]));
  for (float& v : x) v = static_cast<float>(uniform(rng, -1, 1));
  const ConstTensorView xv(DType::kFloat32, shape, x.data());
  const Tensor parent = cumulus::cumsum(xv, 0);  // the workers run now
  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    alarm(60);  // a child that waits for ever dies of SIGALRM
    const Tensor child = cumulus::cumsum(xv, 0);
    bool same =
        cumulus::num_threads() == 2 && std::memcmp(child.raw(), parent.raw(), parent.nbytes()) == 0;
    cumulus::set_num_threads(3);
    const Tensor again = cumulus::cumsum(xv, 0);
    same = same && std::memcmp(again.raw(), parent.raw(), parent.nbytes()) == 0;
    _exit(same ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid) << std::strerror(errno);
  cumulus::set_num_threads(saved);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status)
                                 << " (SIGALRM: it waited for workers it does not have)";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "the child's results or thread count differ from the parent's";
}

// Large blocks go back to a cache for reuse under a mutex, and the first allocation reads the
// memory limit once (a function-local static). A child forked while another thread of the parent
// holds the one or is inside the other would wait for ever at its first large allocation, unless
// both are settled across fork(). One thread takes and returns a 1 MiB block as fast as it can
// (its first one reading the limit) while this one forks 200 children that each allocate one.
TEST(ForkedChild, AllocatesWhileAnotherThreadDoes) {
  const Shape shape{1 << 18};  // 1 MiB of float32: a cached block
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const Tensor t(DType::kFloat32, shape);
      static_cast<void>(t.raw());
    }
  });
  int stuck = 0, failed = 0;
  for (int i = 0; i < 200 && stuck == 0 && failed == 0; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      ++failed;
      break;
    }
    if (pid == 0) {
      alarm(10);  // a child that waits for ever dies of SIGALRM
      const Tensor t(DType::kFloat32, shape);
      _exit(t.raw() != nullptr ? 0 : 1);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
      ++stuck;
    } else if (WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  stop.store(true);
  churn.join();
  EXPECT_EQ(stuck, 0) << "a child died waiting for the block cache (SIGALRM)";
  EXPECT_EQ(failed, 0) << "a fork or a child's allocation failed";
}
}  // namespace
