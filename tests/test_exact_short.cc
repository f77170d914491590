// The floating CumSum of many short contiguous rows (kernels/exact_short.inc): a group of rows
// scanned at once, each row proven exact or redone by the row path. Called directly on every
// kernel table (in place and not, streamed stores on and off) and through cumulus::cumsum at
// several thread counts; every output compared bit for bit with the independent exact::Sum
// (exact.h), NaN outputs with the bits of the row path's exact sum. Lengths run past the group
// path's bound, row counts past a group's, and single rows of a group hold what the group cannot
// prove: cancellation, ties decided far below, -0s, infinities and NaNs. CTest reruns this binary
// under each CUMULUS_ISA.
#include <gtest/gtest.h>

#include <bit>
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
using cumulus::detail::KernelTable;
using cumulus::detail::RowScan;
using cumulus::detail::Tuning;
using cumulus::testing::ScopedThreads;
using cumulus::testing::ScopedTuning;

using exact_test::bits;
using exact_test::kFormat;
using exact_test::nan_bits;
using exact_test::of;
using exact_test::value;

constexpr ScanOptions kAllOptions[] = {{false, false}, {true, false}, {false, true}, {true, true}};
constexpr double kInf = std::numeric_limits<double>::infinity();

// The bits the row path gives a NaN output: its exact sum's NaN (not IEEE addition's, which
// would keep an input's payload).
template <class T>
uint64_t row_path_nan() {
  cumulus::detail::ExactSum sum;
  sum.add(std::nan(""));
  if constexpr (std::is_same_v<T, double>) {
    return bits(sum.to_double());
  } else if constexpr (std::is_same_v<T, float>) {
    return bits(sum.to_float());
  } else if constexpr (std::is_same_v<T, Float16>) {
    return bits(sum.to_float16());
  } else {
    return bits(sum.to_bfloat16());
  }
}

// Each row's exact prefix sums rounded once, as bits; NaN as the row path's.
template <class T>
std::vector<uint64_t> exact_rows(const std::vector<T>& x, std::size_t length, ScanOptions o) {
  std::vector<uint64_t> want(x.size());
  for (std::size_t r = 0; r * length < x.size(); ++r) {
    exact::Sum sum;
    for (std::size_t s = 0; s < length; ++s) {
      const std::size_t i = r * length + (o.reverse ? length - 1 - s : s);
      if (!o.exclusive) sum.add(value(x[i]));
      want[i] = sum.round_bits(kFormat<T>);
      if (o.exclusive) sum.add(value(x[i]));
      if (nan_bits(want[i], kFormat<T>)) want[i] = row_path_nan<T>();
    }
  }
  return want;
}

// The first mismatch of y against `want`, as a failure naming row and element; whether any.
template <class T>
bool differs(const T* y, const std::vector<uint64_t>& want, std::size_t length,
             const std::string& where) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (bits(y[i]) != want[i]) {
      ADD_FAILURE() << where << ": row " << i / length << " element " << i % length
                    << " has bits 0x" << std::hex << bits(y[i]) << ", exact 0x" << want[i];
      return true;
    }
  }
  return false;
}

// rows x length on every table, every direction, in place and not, streamed and not; the kernel
// writes no element past the rows.
template <class T>
void check_kernel(const std::vector<T>& x, std::size_t length, const std::string& what) {
  const std::size_t rows = x.size() / length;
  const T sentinel = of<T>(-7.0);
  for (const ScanOptions o : kAllOptions) {
    const std::vector<uint64_t> want = exact_rows(x, length, o);
    for (const KernelTable* table : exact_test::kernel_tables()) {
      for (const bool in_place : {false, true}) {
        for (const bool stream : {false, true}) {
          if (in_place && stream) continue;  // the ops layer streams only apart from x
          std::vector<T> y = in_place ? x : std::vector<T>(x.size(), sentinel);
          y.push_back(sentinel);
          const RowScan s{in_place ? y.data() : x.data(),
                          y.data(),
                          rows,
                          length,
                          o.exclusive,
                          o.reverse,
                          nullptr,
                          stream};
          table->cumsum[static_cast<int>(cumulus::dtype_of<T>)].rows(s);
          const std::string where =
              what + " (" + table->isa + ", length " + std::to_string(length) + ", rows " +
              std::to_string(rows) + (o.exclusive ? ", exclusive" : "") +
              (o.reverse ? ", reverse" : "") + (in_place ? ", in place" : "") +
              (stream ? ", streamed" : "") + ")";
          if (differs(y.data(), want, length, where)) return;
          if (bits(y.back()) != bits(sentinel)) {
            ADD_FAILURE() << where << ": wrote past the rows";
            return;
          }
        }
      }
    }
  }
}

// The same through cumulus::cumsum on a [rows, length] tensor along axis 1, at 1, 2 and 3
// threads, with the default tuning and with chunks of a few rows (streamed stores on).
template <class T>
void check_op(const std::vector<T>& x, std::size_t length, const std::string& what) {
  const std::vector<int64_t> shape = {static_cast<int64_t>(x.size() / length),
                                      static_cast<int64_t>(length)};
  Tuning small;
  small.min_chunk_elements = 3 * length + 1;
  small.stream_bytes = 0;
  small.stream_every_row = true;
  for (const ScanOptions o : kAllOptions) {
    const std::vector<uint64_t> want = exact_rows(x, length, o);
    for (const int threads : {1, 2, 3}) {
      for (const Tuning& tuning : {Tuning{}, small}) {
        const ScopedThreads scoped_threads(threads);
        const ScopedTuning scoped_tuning(tuning);
        const Tensor y =
            cumulus::cumsum(ConstTensorView(cumulus::dtype_of<T>, shape, x.data()), 1, o);
        const std::string where = what + " (cumsum, " + std::to_string(threads) + " threads" +
                                  (tuning.stream_bytes == 0 ? ", small chunks" : "") +
                                  (o.exclusive ? ", exclusive" : "") +
                                  (o.reverse ? ", reverse" : "") + ")";
        if (differs(y.data<T>(), want, length, where)) return;
      }
    }
  }
}

template <class T>
std::vector<T> of_all(const std::vector<double>& v) {
  std::vector<T> out;
  for (const double d : v) out.push_back(of<T>(d));
  return out;
}

// Ordinary rows with `special` put at row `at` (its elements from `offset` on): every row
// around it must stay exact and every special row must be the row path's.
template <class T>
std::vector<T> rows_with(std::size_t rows, std::size_t length, std::size_t at,
                         const std::vector<double>& special, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<T> x(rows * length);
  for (T& e : x) e = of<T>(uniform(rng));
  for (std::size_t k = 0; k < special.size() && k < length; ++k) {
    x[at * length + k] = of<T>(special[k]);
  }
  return x;
}

// Lengths 1 to 40 and 60 to 68 (the group path stops at 64), row counts of one, of a group and a
// few more (a group holds 512 / length rows) and not a multiple of it; uniform data and data whose
// rows span many binades, so that some groups are proven exact at once and others row by row.
template <class T>
void random_rows() {
  std::mt19937_64 rng(20261201);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::uniform_int_distribution<int> binade(-30, 30);
  for (std::size_t length = 1; length <= 68; length += length == 40 ? 20 : 1) {
    const std::size_t group = 512 / length;
    for (const std::size_t rows : {std::size_t{1}, group + 1, 2 * group + 3}) {
      for (const bool wide : {false, true}) {
        std::vector<T> x(rows * length);
        for (T& e : x) e = of<T>(std::ldexp(uniform(rng), wide ? binade(rng) : 0));
        const std::string what = std::string(wide ? "wide" : "uniform") + " rows";
        check_kernel(x, length, what);
        if (rows > 1 && length % 3 == 1) check_op(x, length, what);
      }
    }
  }
}

TEST(ExactShort, RandomRowsFloat) { random_rows<float>(); }
TEST(ExactShort, RandomRowsDouble) { random_rows<double>(); }
TEST(ExactShort, RandomRowsFloat16) { random_rows<Float16>(); }
TEST(ExactShort, RandomRowsBFloat16) { random_rows<BFloat16>(); }

// One row of a group that no pair of doubles holds (large terms cancelling around small ones),
// the others ordinary; at the group's first, a middle and its last row.
template <class T>
void cancellation() {
  const std::vector<std::vector<double>> specials = {{1e30, 1, -1e30},
                                                     {0x1p100, 1, 0x1p-100, -0x1p100, -1},
                                                     {0x1p60, 0x1p-60, 3, -0x1p60, 0x1p-61}};
  for (const std::size_t length : {3, 4, 5, 8, 16, 32, 64}) {
    const std::size_t rows = 2 * (512 / length) + 1;
    for (const std::size_t at : {std::size_t{0}, rows / 3, 512 / length - 1, rows - 1}) {
      for (const auto& special : specials) {
        if (special.size() > length) continue;
        const std::vector<T> x = rows_with<T>(rows, length, at, special, at + length);
        check_kernel(x, length, "cancellation at row " + std::to_string(at));
      }
    }
  }
}

TEST(ExactShort, CancellationFloat) { cancellation<float>(); }
TEST(ExactShort, CancellationDouble) { cancellation<double>(); }
TEST(ExactShort, CancellationBFloat16) { cancellation<BFloat16>(); }
TEST(ExactShort, CancellationFloat16) {
  // float16 cannot hold 1e30: the widest it has, around tiny terms.
  const std::vector<double> special = {65504, 0x1p-24, -65504, 0x1p-24, 1};
  for (const std::size_t length : {5, 8, 32}) {
    const std::size_t rows = 512 / length + 2;
    const std::vector<Float16> x = rows_with<Float16>(rows, length, 1, special, length);
    check_kernel(x, length, "float16 cancellation");
  }
}

// Exact sums on a rounding tie of the type, decided by a term far below it (and by its sign);
// a plain double sum would round the tie the wrong way.
template <class T>
void ties(int digits) {
  const double half_ulp = std::ldexp(1.0, -digits);   // of 1
  const double tiny = std::ldexp(1.0, -digits - 70);  // beyond a pair of doubles beside 1
  for (const double below : {tiny, -tiny}) {
    for (const std::size_t length : {3, 4, 7, 32, 64}) {
      const std::size_t rows = 512 / length + 5;
      const std::vector<T> x = rows_with<T>(rows, length, 2, {1, half_ulp, below}, length);
      check_kernel(x, length, "tie, below " + std::to_string(below));
    }
  }
  // Two terms only differing far below: 1 + half ulp + tiny, then the tie's other side.
  const std::vector<T> x = of_all<T>({1, half_ulp, tiny, -tiny, -tiny, 3 * half_ulp, tiny, 0});
  check_kernel(x, 8, "tie chain");
}

// A tie decided below double's 53 bits by terms whose magnitudes lie close enough together that
// only the exact bound on their spread sends the group row by row: float's 1, 2^-24 + 2^-35,
// -2^-35 + 2^-58 sum to 1 + 2^-24 + 2^-58 (the tie between 1 and 1 + 2^-23, decided up), which
// double rounds to the tie. bfloat16 needs a chain of terms 7 binades apart to get there.
TEST(ExactShort, TiesBeyondDoubleFloat) {
  for (const std::size_t length : {3, 4, 8}) {
    const std::vector<float> x = rows_with<float>(
        512 / length + 2, length, 1, {1, 0x1p-24 + 0x1p-35, -0x1p-35 + 0x1p-58}, length);
    check_kernel(x, length, "tie beyond double");
  }
}
TEST(ExactShort, TiesBeyondDoubleBFloat16) {
  std::vector<double> chain = {1, 0x1p-8 + 0x1p-15};
  for (int k = 15; k < 57; k += 7) chain.push_back(-std::ldexp(1.0, -k) + std::ldexp(1.0, -k - 7));
  for (const std::size_t length : {8, 16}) {
    const std::vector<BFloat16> x = rows_with<BFloat16>(512 / length + 2, length, 1, chain, length);
    check_kernel(x, length, "tie beyond double");
  }
}

TEST(ExactShort, TiesFloat) { ties<float>(24); }
TEST(ExactShort, TiesDouble) { ties<double>(53); }
TEST(ExactShort, TiesBFloat16) { ties<BFloat16>(8); }
TEST(ExactShort, TiesFloat16) {
  // float16's terms cannot reach 40 binades below 1: the tie of 2048 (ulp 2) at 2^-24.
  const std::vector<double> special = {2048, 1, 0x1p-24};
  for (const double last : {0x1p-24, -0x1p-24}) {
    std::vector<Float16> x = rows_with<Float16>(40, 4, 7, special, 9);
    x[7 * 4 + 2] = of<Float16>(last);
    check_kernel(x, 4, "float16 tie");
  }
}

// Groups whose every row just misses the bound that proves the plain double sums exact: rows of
// eight terms from 1 + 2^-23 to 2^29, whose sum 2^31 + 2^7 + 2^-23 needs 55 bits. In double it
// rounds to 2^31 + 2^7, a tie that float rounds to even (2^31); the answer is 2^31 + 2^8. A bound
// that forgot the row's length would take every group for exact.
TEST(ExactShort, JustOutsideTheBoundFloat) {
  const std::vector<double> row = {0x1p29, 0x1p29, 0x1p29, 0x1p29, 127, 1 + 0x1p-23, 0, 0};
  for (const std::size_t length : {std::size_t{8}, std::size_t{16}}) {
    std::vector<float> x;
    while (x.size() < 2 * 512) {
      for (const double v : row) x.push_back(static_cast<float>(v));
      x.resize(x.size() + length - row.size(), 0.0f);
    }
    check_kernel(x, length, "just outside the bound");
  }
}

// Exact zeros: -0 only while a row's terms are all -0, whatever its neighbours hold; an
// exclusive scan's first output is +0.
template <class T>
void zeros() {
  const std::vector<std::vector<double>> rows = {
      {-0.0, -0.0, -0.0, -0.0}, {0.0, 0.0, 0.0, 0.0},   {-0.0, -0.0, 0.0, -0.0},
      {-0.0, -0.0, -0.0, -0.0}, {1, -1, -0.0, -0.0},    {-0.0, 2, -2, -0.0},
      {-0.0, -0.0, -0.0, -0.0}, {0.0, -0.0, -0.0, 0.0}, {-0.0, -0.0, -0.0, 0.0},
      {-0.0, -0.0, -0.0, -0.0}};
  std::vector<double> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  check_kernel(of_all<T>(flat), 4, "zeros");
  check_kernel(of_all<T>(flat), 2, "zeros in pairs");
  check_kernel(of_all<T>(flat), 1, "zeros alone");
  // The same rows over more than a group, so that whole groups of them go through the vector
  // tables' registers too.
  std::vector<double> many;
  for (int k = 0; k < 16; ++k) many.insert(many.end(), flat.begin(), flat.end());
  check_kernel(of_all<T>(many), 4, "many zeros");
  check_kernel(of_all<T>(many), 2, "many zeros in pairs");
  // A group of all -0 rows but one +0 in its last row.
  for (const std::size_t length : {2, 3, 4, 8, 16, 32, 64}) {
    std::vector<T> x(3 * 512, of<T>(-0.0));
    x.resize(x.size() / length * length);
    x[x.size() - 2] = of<T>(0.0);
    check_kernel(x, length, "-0 rows, one +0");
    check_op(x, length, "-0 rows, one +0");
  }
}

TEST(ExactShort, ZerosFloat) { zeros<float>(); }
TEST(ExactShort, ZerosDouble) { zeros<double>(); }
TEST(ExactShort, ZerosFloat16) { zeros<Float16>(); }
TEST(ExactShort, ZerosBFloat16) { zeros<BFloat16>(); }

// An infinity or NaN in one row of a group: that row takes the row path's infinities and NaN
// (a NaN with a payload and sign of its own, which IEEE addition would keep), the others stay.
template <class T>
void specials() {
  T payload_nan;
  if constexpr (std::is_same_v<T, double>) {
    payload_nan = -std::bit_cast<double>(uint64_t{0x7ff8000000012345});
  } else if constexpr (std::is_same_v<T, float>) {
    payload_nan = -std::bit_cast<float>(uint32_t{0x7fc01234});
  } else {
    payload_nan.bits = std::is_same_v<T, Float16> ? 0xfe12 : 0xffc3;
  }
  const std::vector<std::vector<double>> specials = {
      {kInf}, {1, -kInf, 2}, {kInf, 5, -kInf, 1}, {-kInf, -kInf, 3}, {2, 3, kInf}};
  for (const std::size_t length : {1, 2, 3, 4, 8, 17, 32, 63, 64}) {
    const std::size_t rows = 512 / length + 3;
    for (const std::size_t at : {std::size_t{0}, rows - 1}) {
      for (const auto& special : specials) {
        check_kernel(rows_with<T>(rows, length, at, special, length), length, "infinities");
      }
      std::vector<T> x = rows_with<T>(rows, length, at, {}, length + 1);
      x[at * length + length / 2] = payload_nan;
      check_kernel(x, length, "NaN at row " + std::to_string(at));
      if (at == 0) check_op(x, length, "NaN");
    }
  }
}

TEST(ExactShort, SpecialsFloat) { specials<float>(); }
TEST(ExactShort, SpecialsDouble) { specials<double>(); }
TEST(ExactShort, SpecialsFloat16) { specials<Float16>(); }
TEST(ExactShort, SpecialsBFloat16) { specials<BFloat16>(); }

}  // namespace

// float64 rows longer than the group path's, of a multiple of eight terms: eight at a time,
// transposed. Uniform rows, one row of a batch of eight that no pair holds (large terms cancelling
// around small ones) starting in its first, a middle or its last tile of eight, an infinity or a
// NaN there, and rows of -0 with a +0, a NaN or an infinity; 8, 9 and 17 rows (a batch and a row or
// more left over).
TEST(ExactShort, TiledRowsDouble) {
  std::mt19937_64 rng(20261203);
  std::uniform_real_distribution<double> uniform(-1, 1);
  // Lengths of a multiple of eight, and others, whose last length % 8 terms in scan order (the
  // row's end forward, its start in reverse) follow the tiles a term at a time.
  for (const std::size_t length : {72, 128, 200, 1024, 9, 13, 15, 71, 100, 1001}) {
    for (const std::size_t rows : {8, 9, 17}) {
      std::vector<double> x(rows * length);
      for (double& e : x) e = uniform(rng);
      check_kernel(x, length, "uniform tiled rows");
      for (const std::size_t at :
           {std::size_t{0}, std::size_t{1}, length / 2, length - 5, length - 2, length - 1}) {
        for (const std::vector<double>& special :
             {std::vector<double>{0x1p100, 1, 0x1p-100, -0x1p100, -1},
              std::vector<double>{kInf, 2, -kInf}, std::vector<double>{std::nan("")}}) {
          std::vector<double> y = x;
          const std::size_t row = rows > 8 ? 8 : 3;  // in the leftover rows, or a batch's
          for (std::size_t k = 0; k < special.size() && at + k < length; ++k) {
            y[row * length + at + k] = special[k];
            y[1 * length + at + k] = special[k];
          }
          check_kernel(y, length, "tiled rows, special from term " + std::to_string(at));
        }
      }
      // -0 rows, one with a +0, others with a NaN or an infinity past their first tile: an
      // exclusive output there is the -0 before it.
      std::vector<double> zeros(rows * length, -0.0);
      zeros[2 * length + length / 2] = 0.0;
      zeros[5 * length + length / 2 + 3] = std::nan("");
      zeros[6 * length + length - 9] = -kInf;
      check_kernel(zeros, length, "tiled -0 rows, one +0, a NaN, an infinity");
      // The same at a row's either end (a tail's term, forward or in reverse).
      std::vector<double> ends(rows * length, -0.0);
      ends[1 * length + length - 1] = 0.0;
      ends[3 * length] = 0.0;
      ends[4 * length + length - 1] = std::nan("");
      ends[7 * length] = kInf;
      check_kernel(ends, length, "tiled -0 rows, +0, NaN or an infinity at an end");
    }
  }
}
