// The floating CumSum kernel across columns, called directly on every kernel table: a tile's
// lanes carry on fast while one of them leaves for the exact slow path (a prefix too wide for a
// pair of doubles, an infinity, a NaN) at some step, and the zero-sign record is kept per lane;
// float16 slabs short enough for a plain double scan take it, longer ones do not. Every output is
// compared bit for bit with the independent exact::Sum (exact.h). CTest reruns this binary under
// each CUMULUS_ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cumulus/dtype.h"
#include "exact.h"
#include "exact_types.h"
#include "kernels/kernels.h"
#include "reference.h"

namespace {

using cumulus::BFloat16;
using cumulus::Float16;
using cumulus::detail::KernelTable;
using cumulus::detail::ScanBlock;

using exact_test::bits;
using exact_test::kFormat;
using exact_test::nan_bits;
using exact_test::of;
using exact_test::value;
std::vector<const KernelTable*> tables() { return exact_test::kernel_tables(); }

// Scans columns [col_begin, col_end) of x, shape [length, inner], on every table, exclusive and
// reverse, in place and not; compares those columns with exact::Sum and checks that the kernel
// left the others alone.
template <class T>
void check(const std::vector<T>& x, std::size_t length, std::size_t inner, std::size_t col_begin,
           std::size_t col_end, const std::string& what) {
  constexpr exact::Format kF = kFormat<T>;
  const T sentinel = of<T>(-7.0);
  for (const KernelTable* table : tables()) {
    for (const bool exclusive : {false, true}) {
      for (const bool reverse : {false, true}) {
        for (const bool in_place : {false, true}) {
          std::vector<T> y = in_place ? x : std::vector<T>(x.size(), sentinel);
          const ScanBlock b{x.data(), in_place ? y.data() : y.data(),
                            1,        length,
                            inner,    col_begin,
                            col_end,  exclusive,
                            reverse};
          ScanBlock run = b;
          if (in_place) run.x = y.data();
          table->cumsum[static_cast<int>(cumulus::dtype_of<T>)].block(run);
          const std::string where = what + " (" + table->isa + (exclusive ? ", exclusive" : "") +
                                    (reverse ? ", reverse" : "") + (in_place ? ", in place" : "") +
                                    ")";
          int bad = 0;
          for (std::size_t c = 0; c < inner; ++c) {
            exact::Sum sum;
            for (std::size_t s = 0; s < length; ++s) {
              const std::size_t i = (reverse ? length - 1 - s : s) * inner + c;
              const bool scanned = c >= col_begin && c < col_end;
              if (!scanned) {
                const uint64_t want = bits(in_place ? x[i] : sentinel);
                if (bits(y[i]) != want && bad++ == 0) {
                  ADD_FAILURE() << where << ": column " << c << " outside the block was written";
                }
                continue;
              }
              if (!exclusive) sum.add(value(x[i]));
              const uint64_t want = sum.round_bits(kF);
              if (exclusive) sum.add(value(x[i]));
              const uint64_t got = bits(y[i]);
              if (got != want && !(nan_bits(got, kF) && nan_bits(want, kF)) && bad++ == 0) {
                ADD_FAILURE() << where << ": column " << c << " step " << s << " has bits 0x"
                              << std::hex << got << ", exact 0x" << want;
              }
            }
          }
          if (bad > 0) return;
        }
      }
    }
  }
}

// Random values of modest spread: every column stays in its pair of doubles.
template <class T>
std::vector<T> random_columns(std::size_t length, std::size_t inner, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<T> x(length * inner);
  for (T& e : x) e = of<T>(normal(rng));
  return x;
}

template <class T>
class ExactColumns : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double, Float16, BFloat16>;
TYPED_TEST_SUITE(ExactColumns, FloatTypes);

// Tile widths around the kernel's 256 lanes and the vectors' 8, odd ones included, and a block
// that starts and ends inside the row.
constexpr std::size_t kWidths[] = {1, 7, 13, 255, 256, 257, 300};

// One column of a tile, or several, meet an infinity or a NaN at some step (and, for the types
// that can, a prefix wider than a pair of doubles: big, 1, tiny); the others carry on.
TYPED_TEST(ExactColumns, OneColumnLeavesTheTile) {
  using T = TypeParam;
  constexpr exact::Format kF = kFormat<T>;
  const double inf = std::numeric_limits<double>::infinity();
  const double big = std::ldexp(1, kF.emax);
  const double tiny = std::ldexp(1, kF.emin - kF.precision + 1);
  const bool wide = kF.emax - kF.emin > 120;  // a pair holds float16's whole range
  const std::size_t length = 40;
  for (const std::size_t inner : kWidths) {
    for (int kind = 0; kind < 4; ++kind) {
      if (kind == 3 && !wide) continue;
      std::vector<T> x = random_columns<T>(length, inner, inner * 10 + kind);
      const std::size_t c = inner / 2, step = 9 + kind;
      if (kind == 0) x[step * inner + c] = of<T>(inf);
      if (kind == 1) x[step * inner + c] = of<T>(std::nan(""));
      if (kind == 2) {  // +inf, later -inf: NaN from there
        x[step * inner + c] = of<T>(inf);
        x[(step + 10) * inner + c] = of<T>(-inf);
      }
      if (kind == 3) {  // big, then tiny: wider than the pair; -big brings it back
        x[step * inner + c] = of<T>(big);
        x[(step + 3) * inner + c] = of<T>(tiny);
        x[(step + 12) * inner + c] = of<T>(-big);
      }
      if (inner > 1) x[(step + 5) * inner] = of<T>(-inf);               // the first lane, later
      if (inner > 2) x[(length - 1) * inner + inner - 1] = of<T>(inf);  // the last, at the end
      const std::string what = "width " + std::to_string(inner) + " kind " + std::to_string(kind);
      check(x, length, inner, 0, inner, what);
      if (inner > 4) check(x, length, inner, 1, inner - 2, what + ", inner block");
    }
  }
}

// Zero signs per lane: all -0 columns stay -0 (exclusive: +0 first) while a neighbour gets a +0,
// a value that cancels, or a nonzero.
TYPED_TEST(ExactColumns, ZeroSignPerLane) {
  using T = TypeParam;
  const std::size_t length = 24;
  for (const std::size_t inner : kWidths) {
    std::vector<T> x(length * inner, of<T>(-0.0));
    for (std::size_t c = 1; c < inner; c += 3) x[(c % length) * inner + c] = of<T>(0.0);
    for (std::size_t c = 2; c < inner; c += 3) {
      x[3 * inner + c] = of<T>(1.5);
      x[7 * inner + c] = of<T>(-1.5);
    }
    check(x, length, inner, 0, inner, "zeros, width " + std::to_string(inner));
  }
}

// A column slow from its first step, and one that leaves at the last.
TYPED_TEST(ExactColumns, LeavesAtTheEnds) {
  using T = TypeParam;
  const std::size_t length = 17, inner = 19;
  std::vector<T> x = random_columns<T>(length, inner, 5);
  x[3] = of<T>(std::nan(""));
  x[(length - 1) * inner + 4] = of<T>(std::numeric_limits<double>::infinity());
  check(x, length, inner, 0, inner, "ends");
}

// float16 slabs of 8192 rows (the plain double scan) and 8193 (the pairs): partial sums up to
// 2^28 that come back, a 2^-24 term that must survive them.
TEST(ExactColumnsHalf, LongSlabsNearTheDoubleLimit) {
  const double unit = std::ldexp(1, -24), max = 65504;
  for (const std::size_t length : {8192, 8193}) {
    const std::size_t inner = 9;
    std::vector<Float16> x(length * inner);
    for (std::size_t s = 0; s < length; ++s) {
      for (std::size_t c = 0; c < inner; ++c) {
        double v = s < length / 2 ? max : -max;
        if (s == 0 || (s + c) % 1000 == 0) v = unit * static_cast<double>(c + 1);
        x[s * inner + c] = of<Float16>(v);
      }
    }
    check(x, length, inner, 0, inner, "float16 slab of " + std::to_string(length));
  }
}

// A float16 slab whose sums pass 2^29, where double is no longer exact for 2^-24 terms: the
// 2^-24 first term must still be there when the sum comes back.
TEST(ExactColumnsHalf, PastTwoToThe29) {
  const double unit = std::ldexp(1, -24), max = 65504;
  const std::size_t up = 8200, inner = 3, length = 2 * up + 1;
  std::vector<Float16> x(length * inner);
  for (std::size_t s = 0; s < length; ++s) {
    for (std::size_t c = 0; c < inner; ++c) {
      x[s * inner + c] = of<Float16>(s == 0    ? unit * static_cast<double>(c + 1)
                                     : s <= up ? max
                                               : -max);
    }
  }
  check(x, length, inner, 0, inner, "float16 past 2^29");
}

}  // namespace
