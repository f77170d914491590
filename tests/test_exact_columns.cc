// The floating CumSum kernel across columns, called directly on every kernel table: a tile's
// lanes carry on fast while one of them leaves for the exact slow path (a prefix too wide for a
// pair of doubles, an infinity, a NaN) at some step, and the zero-sign record is kept per lane;
// float16 slabs short enough for a plain double scan take it, longer ones do not. Every output is
// compared bit for bit with the independent exact::Sum (exact.h), a NaN with the one quiet NaN it
// gives (positive, the top fraction bit set). CTest reruns this binary under each CUMULUS_ISA.
#include <gtest/gtest.h>

#include <algorithm>
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
  for (const bool exclusive : {false, true}) {
    for (const bool reverse : {false, true}) {
      // The exact outputs of the block's columns, once for every table and way of calling.
      std::vector<uint64_t> want(x.size());
      for (std::size_t c = col_begin; c < col_end; ++c) {
        exact::Sum sum;
        for (std::size_t s = 0; s < length; ++s) {
          const std::size_t i = (reverse ? length - 1 - s : s) * inner + c;
          if (!exclusive) sum.add(value(x[i]));
          want[i] = sum.round_bits(kF);
          if (exclusive) sum.add(value(x[i]));
        }
      }
      for (const KernelTable* table : tables()) {
        for (const int mode : {0, 1, 2}) {  // apart, apart with streamed stores, in place
          const bool in_place = mode == 2;
          std::vector<T> y = in_place ? x : std::vector<T>(x.size(), sentinel);
          const ScanBlock run{in_place ? y.data() : x.data(),
                              y.data(),
                              1,
                              length,
                              inner,
                              col_begin,
                              col_end,
                              exclusive,
                              reverse,
                              nullptr,
                              nullptr,
                              mode == 1};
          table->cumsum[static_cast<int>(cumulus::dtype_of<T>)].block(run);
          const std::string where = what + " (" + table->isa + (exclusive ? ", exclusive" : "") +
                                    (reverse ? ", reverse" : "") + (in_place ? ", in place" : "") +
                                    (mode == 1 ? ", streamed" : "") + ")";
          int bad = 0;
          for (std::size_t i = 0; i < x.size(); ++i) {
            const std::size_t c = i % inner, s = i / inner;
            const uint64_t got = bits(y[i]);
            if (c < col_begin || c >= col_end) {
              if (got != bits(in_place ? x[i] : sentinel) && bad++ == 0) {
                ADD_FAILURE() << where << ": column " << c << " outside the block was written";
              }
              continue;
            }
            if (got != want[i] && bad++ == 0) {  // a NaN too: the one quiet NaN, positive
              ADD_FAILURE() << where << ": column " << c << " step "
                            << (reverse ? length - 1 - s : s) << " has bits 0x" << std::hex << got
                            << ", exact 0x" << want[i];
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

// Tile widths around the kernel's 512 lanes (kExactColumnTile) and the vectors' 8, odd ones
// included, and a block that starts and ends inside the row.
constexpr std::size_t kWidths[] = {1, 7, 13, 255, 257, 511, 512, 513, 1100};

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

// Terms k/64 with |k| < 256, exact in every type: each prefix is exact in a double, so a tile of
// them keeps every lo at 0 and takes the one-addition step, until a column gets something else.
template <class T>
std::vector<T> plain_columns(std::size_t length, std::size_t inner, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> k(-255, 255);
  std::vector<T> x(length * inner);
  for (T& e : x) e = of<T>(k(rng) / 64.0);
  return x;
}

// check() on x and on x with its rows upside down, so that the forward and the reverse scans
// each meet the events in both orders; and on a block of the columns that starts and ends
// inside the row.
template <class T>
void check_both_ways(const std::vector<T>& x, std::size_t length, std::size_t inner,
                     const std::string& what) {
  check(x, length, inner, 0, inner, what);
  std::vector<T> flipped(x.size());
  for (std::size_t s = 0; s < length; ++s) {
    std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(s * inner), inner,
                flipped.begin() + static_cast<std::ptrdiff_t>((length - 1 - s) * inner));
  }
  check(flipped, length, inner, 0, inner, what + ", rows flipped");
  if (inner > 4) check(x, length, inner, 1, inner - 2, what + ", inner block");
}

template <class T>
class ExactColumnsWide : public ::testing::Test {};
// The types whose range holds 2^-62 next to 1: a term below the carry's ulp.
using WideTypes = ::testing::Types<float, double, BFloat16>;
TYPED_TEST_SUITE(ExactColumnsWide, WideTypes);

// Widths from 1 to 1100: every remainder of the vectors' 8 lanes, and across the 512-lane tile.
constexpr std::size_t kManyWidths[] = {1,  2,  3,  4,   5,   6,   7,   8,   9,   15,  16,  17,  23,
                                       31, 32, 33, 100, 255, 256, 257, 511, 512, 513, 519, 1100};

// One lane of a plain tile gets a term below its carry's ulp: its lo becomes nonzero for that
// lane only and decides the rounding of a tie (1 + 2^-p, p the type's precision, rounds up only
// with the 2^-62 below it), then comes back to 0 (-2^-62) and goes nonzero again at the last
// step. Another lane's lo becomes nonzero at the second step (1, then 2^-62) and stays so;
// a third takes 2^-62 first and 1 after it.
TYPED_TEST(ExactColumnsWide, LowPartInSomeLanes) {
  using T = TypeParam;
  constexpr exact::Format kF = kFormat<T>;
  const double tie = std::ldexp(1, -kF.precision), low = std::ldexp(1, -62);
  const std::size_t length = 30;
  for (const std::size_t inner : kManyWidths) {
    std::vector<T> x = plain_columns<T>(length, inner, inner);
    const auto set = [&](std::size_t c, const std::vector<double>& column) {
      for (std::size_t s = 0; s < length; ++s) x[s * inner + c] = of<T>(column[s]);
    };
    for (const std::size_t c : {inner / 2, inner - 1}) {
      std::vector<double> column(length, 0.0);
      column[0] = 1;
      column[3] = tie;
      column[5] = low;
      column[12] = -low;
      column[length - 1] = low;
      set(c, column);
    }
    if (inner > 2) {
      std::vector<double> column(length, 0.0);
      column[0] = 1;
      column[1] = low;
      column[9] = tie;
      set(0, column);
    }
    if (inner > 3) {
      std::vector<double> column(length, 0.0);
      column[0] = low;
      column[1] = 1;
      column[2] = tie;
      set(1, column);
    }
    check_both_ways(x, length, inner, "low parts, width " + std::to_string(inner));
  }
}

// Zero signs while the tile takes the two-TwoSum step (lane 0 of every tile keeps a nonzero lo
// from the second step on): all -0 columns stay -0 (exclusive: +0 first), a -0 column meets a +0,
// a column cancels to +0; and once lane 0's lo is back to 0, the same in the one-addition step.
TYPED_TEST(ExactColumnsWide, ZeroSignBesideAWidePair) {
  using T = TypeParam;
  const double low = std::ldexp(1, -62);
  const std::size_t length = 24;
  for (const std::size_t inner : {2, 3, 9, 17, 256, 257, 512, 513, 1100}) {
    std::vector<T> x(length * inner, of<T>(-0.0));
    for (std::size_t c = 0; c < inner; ++c) {
      if (c % 512 == 0) {
        x[c] = of<T>(1.0);
        x[inner + c] = of<T>(low);
        x[14 * inner + c] = of<T>(-low);
        x[15 * inner + c] = of<T>(-1.0);
      } else if (c % 4 == 1) {
        x[(3 + c % 17) * inner + c] = of<T>(0.0);
      } else if (c % 4 == 2) {
        x[4 * inner + c] = of<T>(2.5);
        x[9 * inner + c] = of<T>(-2.5);
      }
    }
    check_both_ways(x, length, inner, "zeros beside a pair, width " + std::to_string(inner));
  }
}

// An infinity or a NaN in the lane whose lo is nonzero, in another lane while a lo is nonzero,
// at the step where another lane's lo first becomes nonzero, and at the first step.
TYPED_TEST(ExactColumnsWide, SpecialsInEitherStep) {
  using T = TypeParam;
  const double inf = std::numeric_limits<double>::infinity(), low = std::ldexp(1, -62);
  const std::size_t length = 20;
  for (const std::size_t inner : {5, 16, 31, 256, 261, 512, 517}) {
    for (int kind = 0; kind < 4; ++kind) {
      std::vector<T> x = plain_columns<T>(length, inner, inner + 100 * kind);
      const std::size_t a = inner - 1, b = inner / 2, c = 1, d = inner / 2 + 1;
      const double special = kind % 2 == 0 ? inf : std::nan("");
      x[a] = of<T>(1.0);
      x[2 * inner + a] = of<T>(low);  // lane a's lo is nonzero from step 2
      x[6 * inner + (kind < 2 ? a : d)] = of<T>(special);
      x[inner + c] = of<T>(low);       // lane c's e != 0 at step 1 ...
      x[inner + b] = of<T>(-special);  // ... where lane b meets an infinity or a NaN
      x[0] = of<T>(-inf);              // and lane 0 one at step 0
      check_both_ways(x, length, inner,
                      "specials, width " + std::to_string(inner) + " kind " + std::to_string(kind));
    }
  }
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

// A float16 slab longer than the plain double scan takes: past 2^29 one lane's carry has an ulp
// above 2^-24, so a 2^-24 term gives that lane alone a nonzero lo, which -2^-24 takes back to 0;
// 3 2^-24 makes it nonzero again, and is all that is left when the sum comes back. The other
// lanes stay plain.
TEST(ExactColumnsHalf, LowPartInOneLongLane) {
  const double unit = std::ldexp(1, -24), max = 65504;
  const std::size_t up = 8200, length = 2 * up + 20, inner = 11, c = 6;
  std::vector<Float16> x = plain_columns<Float16>(length, inner, 3);
  for (std::size_t s = 0; s < length; ++s) {
    double v = s < up ? max : s >= up + 10 && s < 2 * up + 10 ? -max : 0.0;
    if (s == up + 2) v = unit;
    if (s == up + 4) v = -unit;
    if (s == up + 6) v = 3 * unit;
    x[s * inner + c] = of<Float16>(v);
  }
  check_both_ways(x, length, inner, "float16 lane past 2^29");
}

}  // namespace
