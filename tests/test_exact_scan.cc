// Floating CumSum is exact: every output is its exact prefix sum rounded once, bit for bit what
// the independent exact::Sum (exact.h) gives, on every kernel table, thread count, long-row split,
// axis, exclusive and reverse, and in place. The data are the hard cases for a fast accumulator:
// cancellation, ties decided far below the last place, wide ranges with subnormals, overflow and
// back, infinities, NaN and -0. CTest reruns this binary under each CUMULUS_ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cumulus/ops.h"
#include "exact.h"
#include "exact_types.h"
#include "kernels/kernels.h"
#include "ops/tuning.h"
#include "reference.h"
#include "scoped.h"

namespace {

using cumulus::BFloat16;
using cumulus::ConstTensorView;
using cumulus::Float16;
using cumulus::ScanOptions;
using cumulus::Tensor;
using cumulus::TensorView;
using cumulus::detail::KernelTable;
using cumulus::detail::Tuning;
using Shape = std::vector<int64_t>;
using Rng = std::mt19937_64;

using cumulus::testing::ScopedThreads;
using cumulus::testing::ScopedTuning;

// ---- Types --------------------------------------------------------------------------------------

using exact_test::bits;
using exact_test::kFormat;
using exact_test::nan_bits;
using exact_test::of;
using exact_test::value;
std::vector<const KernelTable*> tables() { return exact_test::kernel_tables(); }

// The largest finite value, and the spacing of values at 1 (2^(1 - p)), of T.
template <class T>
double max_of() {
  const exact::Format f = kFormat<T>;
  return std::ldexp(2 - std::ldexp(1, 1 - f.precision), f.emax);
}
template <class T>
double ulp_of_one() {
  return std::ldexp(1, 1 - kFormat<T>.precision);
}

// ---- Reference and comparison
// ---------------------------------------------------------------------

// x has shape [outer, length, inner], scanned along the middle axis.
template <class T>
std::vector<uint64_t> expected(const std::vector<T>& x, std::size_t outer, std::size_t length,
                               std::size_t inner, ScanOptions o) {
  std::vector<uint64_t> want(x.size());
  for (std::size_t a = 0; a < outer; ++a) {
    for (std::size_t c = 0; c < inner; ++c) {
      exact::Sum sum;
      for (std::size_t s = 0; s < length; ++s) {
        const std::size_t l = o.reverse ? length - 1 - s : s;
        const std::size_t i = (a * length + l) * inner + c;
        if (!o.exclusive) sum.add(value(x[i]));
        want[i] = sum.round_bits(kFormat<T>);
        if (o.exclusive) sum.add(value(x[i]));
      }
    }
  }
  return want;
}

template <class T>
std::vector<T> run(const std::vector<T>& x, const Shape& shape, int64_t axis, ScanOptions o,
                   bool in_place) {
  constexpr auto kType = cumulus::dtype_of<T>;
  Tensor xs(kType, shape);
  std::copy(x.begin(), x.end(), xs.data<T>());
  if (in_place) {
    cumulus::cumsum(ConstTensorView(kType, shape, xs.data<T>()), axis,
                    TensorView{kType, shape, xs.data<T>()}, o);
    return {xs.data<T>(), xs.data<T>() + x.size()};
  }
  const Tensor ys = cumulus::cumsum(ConstTensorView(kType, shape, xs.data<T>()), axis, o);
  return {ys.data<T>(), ys.data<T>() + x.size()};
}

// Counts the outputs that differ from the reference (NaN matches any NaN), reporting the first.
template <class T>
int mismatches(const std::vector<T>& got, const std::vector<uint64_t>& want,
               const std::string& what) {
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const uint64_t g = bits(got[i]);
    const bool same = g == want[i] || (nan_bits(g, kFormat<T>) && nan_bits(want[i], kFormat<T>));
    if (!same && bad++ == 0) {
      ADD_FAILURE() << what << ": output " << i << " has bits 0x" << std::hex << g << ", exact 0x"
                    << want[i];
    }
  }
  return bad;
}

// ---- The variations
// -------------------------------------------------------------------------------

// The default table, and the small thresholds that cut a row of a few hundred elements into
// pieces over several rounds and columns into narrow tiles.
std::vector<Tuning> tunings() {
  std::vector<Tuning> all(1);
  for (const KernelTable* table : tables()) {
    Tuning t;
    t.long_row = 64;
    t.piece = 37;
    t.pieces_per_round = 3;
    t.column_tile = 7;
    t.min_chunk_elements = 1;
    t.stream_bytes = 0;
    t.stream_every_row = true;
    t.table = table;
    all.push_back(t);
  }
  return all;
}

constexpr ScanOptions kAllOptions[] = {{false, false}, {true, false}, {false, true}, {true, true}};

// Every variation of one input of shape [outer, length, inner] (inner 1: rows, 2-D; else 3-D
// along axis 1) must give the reference's bits.
template <class T>
void check_all(const std::vector<T>& x, std::size_t outer, std::size_t length, std::size_t inner,
               const std::string& what, std::vector<int> threads = {1, 2, 3, 8}) {
  const Shape shape = inner == 1 ? Shape{static_cast<int64_t>(outer), static_cast<int64_t>(length)}
                                 : Shape{static_cast<int64_t>(outer), static_cast<int64_t>(length),
                                         static_cast<int64_t>(inner)};
  int failures = 0;
  for (const ScanOptions o : kAllOptions) {
    const std::vector<uint64_t> want = expected(x, outer, length, inner, o);
    for (const Tuning& tuning : tunings()) {
      const ScopedTuning scoped(tuning);
      for (const int n : threads) {
        const ScopedThreads scoped_threads(n);
        for (const bool in_place : {false, true}) {
          if (in_place && n != 2) continue;  // in place once per table and options
          const std::string where =
              what + " (" + (tuning.table != nullptr ? tuning.table->isa : "default") +
              ", small tuning " + (tuning.table != nullptr ? "yes" : "no") + ", " +
              std::to_string(n) + " threads" + (o.exclusive ? ", exclusive" : "") +
              (o.reverse ? ", reverse" : "") + (in_place ? ", in place" : "") + ")";
          failures += mismatches(run(x, shape, 1, o, in_place), want, where) != 0;
          if (failures > 4) return;  // enough to see the pattern
        }
      }
    }
  }
}

// One row of data as a row [1, n], then as columns [1, n, 260] (column c the row rotated by c),
// more columns than one kernel tile.
template <class T>
void check_layouts(const std::vector<T>& row, const std::string& what) {
  check_all(row, 1, row.size(), 1, what + ", one row");
  const std::size_t n = row.size();
  const std::size_t inner = 260;
  std::vector<T> cols(n * inner);
  for (std::size_t l = 0; l < n; ++l) {
    for (std::size_t c = 0; c < inner; ++c) cols[l * inner + c] = row[(l + c) % n];
  }
  check_all(cols, 1, n, inner, what + ", columns", {3});
}

// ---- Data
// ----------------------------------------------------------------------------------------

template <class T>
class ExactScan : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double, Float16, BFloat16>;
TYPED_TEST_SUITE(ExactScan, FloatTypes);

// [big, 1, -big] repeated at several scales: the 1s survive only if nothing is lost.
TYPED_TEST(ExactScan, Cancellation) {
  using T = TypeParam;
  const int emax = kFormat<T>.emax;
  for (const int e : {emax / 4, emax / 2, emax - 1}) {
    std::vector<T> row;
    const double big = std::ldexp(1.5, e);
    for (int k = 0; k < 40; ++k) {
      for (const double v : {big, 1.0, -big, 0.25 * (k % 3), -big, big}) row.push_back(of<T>(v));
    }
    check_layouts(row, "cancellation at 2^" + std::to_string(e));
  }
}

// 1 + half an ulp is a tie (to even); a tiny term far below decides it either way, and then
// leaves again.
TYPED_TEST(ExactScan, TiesDecidedFarBelow) {
  using T = TypeParam;
  const double half = ulp_of_one<T>() / 2;
  const double tiny = std::ldexp(1, kFormat<T>.emin - kFormat<T>.precision + 1);  // subnormal min
  std::vector<T> row;
  for (int k = 0; k < 30; ++k) {
    for (const double v : {1.0, half, tiny, -tiny, -tiny, tiny, 3 * half, -1.0, -4 * half}) {
      row.push_back(of<T>(k % 2 == 0 ? v : -v));
    }
  }
  check_layouts(row, "ties");
}

// The same tie at every place of short rows and near the ends of longer ones, in both scan
// orders: 1 and half an ulp at each end of a row of zeros, and one tiny term at position p that
// decides the ties of the prefixes holding it. Where a row's last terms go as a step of their own
// (a row's length less a multiple of the vector step), the tiny term's range counts there too.
TYPED_TEST(ExactScan, TieDecidedAtEveryPlaceOfARow) {
  using T = TypeParam;
  const double half = ulp_of_one<T>() / 2;
  const double tiny = std::ldexp(1, kFormat<T>.emin - kFormat<T>.precision + 1);
  const auto places = [](std::size_t n) {
    std::vector<std::size_t> p;
    for (std::size_t i = 2; i + 2 < n; ++i) {
      if (n <= 40 || i < 20 || i + 20 >= n) p.push_back(i);
    }
    return p;
  };
  for (const std::size_t n : {4,  5,  6,  7,  8,  11, 15,  16,   17,   19,   20,   23,
                              24, 31, 32, 33, 36, 40, 100, 1000, 2047, 2048, 2049, 4100}) {
    for (const std::size_t p : places(n)) {
      std::vector<T> row(n, of<T>(0.0));
      row[0] = row[n - 1] = of<T>(1.0);
      row[1] = row[n - 2] = of<T>(half);
      row[p] = of<T>(tiny);
      check_all(row, 1, n, 1, "tie at " + std::to_string(p) + " of " + std::to_string(n), {2});
    }
  }
}

// Random signs and exponents over the whole range, subnormals included.
TYPED_TEST(ExactScan, WideRangeWithSubnormals) {
  using T = TypeParam;
  Rng rng(7);
  const exact::Format f = kFormat<T>;
  std::vector<T> row(700);
  for (T& e : row) {
    const int exponent =
        f.emin - f.precision + 1 + static_cast<int>(rng() % (f.emax - f.emin + f.precision));
    const double m = 1 + static_cast<double>(rng() >> 11) * 0x1p-53;
    e = of<T>((rng() % 2 != 0 ? -m : m) * std::ldexp(1, exponent));
  }
  check_layouts(row, "wide range");
}

// Prefixes beyond the range round to infinity and come back when the exact sum does.
TYPED_TEST(ExactScan, OverflowAndBack) {
  using T = TypeParam;
  const double max = max_of<T>();
  std::vector<T> row;
  for (int k = 0; k < 20; ++k) {
    for (const double v : {max, max, 1.0, -max, -max, -max, 0.5 * max, max, -max}) {
      row.push_back(of<T>(v));
    }
  }
  check_layouts(row, "overflow and back");
}

// Signed zeros alone (-0 until a +0 or a value arrives), then infinities and NaN.
TYPED_TEST(ExactScan, SignedZerosInfinitiesAndNan) {
  using T = TypeParam;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<T> zeros(100, of<T>(-0.0));
  check_layouts(zeros, "only -0");
  zeros[60] = of<T>(0.0);
  check_layouts(zeros, "-0 and one +0");
  std::vector<T> row;
  for (int k = 0; k < 50; ++k) row.push_back(of<T>(k % 2 == 0 ? -0.0 : 0.0));
  for (int k = 0; k < 50; ++k) row.push_back(of<T>(k == 3 ? -1.0 : k == 4 ? 1.0 : -0.0));
  check_layouts(row, "zeros that cancel");
  for (const double special : {inf, -inf, std::nan("")}) {
    std::vector<T> r(200, of<T>(1.5));
    r[77] = of<T>(special);
    check_layouts(r, "one special " + std::to_string(special));
  }
  std::vector<T> both(200, of<T>(0.5));
  both[10] = of<T>(inf);
  both[150] = of<T>(-inf);
  check_layouts(both, "+inf then -inf");
}

// Random normal values in long rows (pieces over rounds) and several rows, at many magnitudes.
TYPED_TEST(ExactScan, RandomNormalRows) {
  using T = TypeParam;
  Rng rng(11);
  std::normal_distribution<double> normal;
  std::vector<T> x(3 * 1000);
  for (T& e : x) e = of<T>(normal(rng));
  check_all(x, 3, 1000, 1, "normal rows");
  check_all(x, 1, 3000, 1, "one normal row");
  check_all(x, 3, 100, 10, "normal columns", {1, 2});
}

}  // namespace
