// The floating CumSum along rows where it takes the fast vector paths a block at a time: the guards
// that prove a block's double sums exact, at its boundaries, against the independent exact::Sum
// (exact.h), on every kernel table, with and without long-row pieces (whose carries enter the
// guard), in all four directions; float64's blocks of lanes where each of their exactness tests
// fails, also through the row and chained kernels directly (in place, streamed, at every alignment,
// NaN bits the row path's).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cumulus/ops.h"
#include "exact.h"
#include "exact_types.h"
#include "kernels/kernels.h"
#include "kernels/tiles.h"
#include "ops/tuning.h"
#include "reference.h"
#include "scoped.h"

namespace {

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
std::vector<const KernelTable*> tables() { return exact_test::kernel_tables(); }

// The default; each table whole; each table with a row cut into pieces of a few thousand (their
// carries land anywhere in a block) and of a few dozen; streamed stores on.
std::vector<Tuning> tunings() {
  std::vector<Tuning> all(1);
  for (const KernelTable* table : tables()) {
    for (const std::size_t piece : {std::size_t{0}, std::size_t{3001}, std::size_t{37}}) {
      Tuning t;
      if (piece != 0) {
        t.long_row = 64;
        t.piece = piece;
        t.pieces_per_round = 3;
      }
      t.stream_bytes = 0;
      t.stream_every_row = true;
      t.table = table;
      all.push_back(t);
    }
  }
  return all;
}

constexpr ScanOptions kAllOptions[] = {{false, false}, {true, false}, {false, true}, {true, true}};

// Every direction, table and split of the row must give the exact prefix sums rounded once.
template <class T>
void check_row(const std::vector<T>& x, const std::string& what) {
  constexpr auto kType = cumulus::dtype_of<T>;
  const std::vector<int64_t> shape = {1, static_cast<int64_t>(x.size())};
  for (const ScanOptions o : kAllOptions) {
    std::vector<uint64_t> want(x.size());
    exact::Sum sum;
    for (std::size_t s = 0; s < x.size(); ++s) {
      const std::size_t i = o.reverse ? x.size() - 1 - s : s;
      if (!o.exclusive) sum.add(ref::Num<T>::to_double(x[i]));
      want[i] = sum.round_bits(kFormat<T>);
      if (o.exclusive) sum.add(ref::Num<T>::to_double(x[i]));
    }
    for (const Tuning& tuning : tunings()) {
      const ScopedTuning scoped(tuning);
      const Tensor ys = cumulus::cumsum(ConstTensorView(kType, shape, x.data()), 1, o);
      const std::string where =
          what + " (" + (tuning.table != nullptr ? tuning.table->isa : "default") + ", piece " +
          std::to_string(tuning.table != nullptr && tuning.long_row == 64 ? tuning.piece : 0) +
          (o.exclusive ? ", exclusive" : "") + (o.reverse ? ", reverse" : "") + ")";
      int bad = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const uint64_t g = bits(ys.data<T>()[i]);
        if (g == want[i] || (nan_bits(g, kFormat<T>) && nan_bits(want[i], kFormat<T>))) continue;
        if (bad++ == 0) {
          ADD_FAILURE() << where << ": output " << i << " has bits 0x" << std::hex << g
                        << ", exact 0x" << want[i];
        }
      }
      if (bad != 0) return;
    }
  }
}

constexpr double kHalfMax = 65504;
constexpr double kHalfTiny = 0x1p-24;  // the smallest subnormal float16

// Two blocks of the largest float16 take the sum just below 2^28, then just below 2^29; from
// there a block of large terms passes 2^29, where tiny terms no longer fit a double beside the
// sum; they must survive to the end, where the large terms cancel.
TEST(ExactRows, Float16SumsAroundTheGuard) {
  std::vector<Float16> row;
  for (int k = 0; k < 2 * 4096 + 8; ++k) row.push_back(of<Float16>(kHalfMax));
  for (int k = 0; k < 2000; ++k) row.push_back(of<Float16>(kHalfTiny));
  for (int k = 0; k < 2 * 4096 + 8; ++k) row.push_back(of<Float16>(-kHalfMax));
  for (int k = 0; k < 5000; ++k) row.push_back(of<Float16>(k % 2 == 0 ? kHalfTiny : -kHalfTiny));
  check_row(row, "float16 around 2^28");
  // A carry just above 2^28 at a block's start (the exact path), then the fast path again.
  row.clear();
  for (int k = 0; k < 4096 + 3; ++k) row.push_back(of<Float16>(kHalfMax));
  for (int k = 0; k < 4093; ++k) row.push_back(of<Float16>(3 * kHalfTiny));
  for (int k = 0; k < 4096 + 3; ++k) row.push_back(of<Float16>(-kHalfMax));
  for (int k = 0; k < 5000; ++k) row.push_back(of<Float16>(-kHalfTiny));
  check_row(row, "float16 just above 2^28");
}

// Tiny terms arriving late, after long stretches of ordinary values; and uniform random data.
TEST(ExactRows, Float16TinyTermsLateAndRandom) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<Float16> row(30000);
  for (Float16& e : row) e = of<Float16>(uniform(rng) * 1000);
  for (std::size_t i = 20000; i < row.size(); i += 7) row[i] = of<Float16>(3 * kHalfTiny);
  check_row(row, "float16 random, tiny late");
}

// float and bfloat16 blocks at the edge of the guard: runs of the largest mantissa at 2^1, a term
// `spread` binades lower with its last bit set, the run taken back out. At the guard's limit
// (53 - p - 8 binades for blocks of 256) a block's prefix is still exact in double; one binade
// more and the small term's last bit falls off a prefix of ~2^9, which the output shows once the
// run is gone. Runs of varying length put the small term at every depth of a block.
//
// The same for blocks of 2^block_log2 terms: `rounds` runs of `shortest` + (r * step) % `varied`.
template <class T>
void check_guard_edge(int precision, int block_log2, int rounds, int shortest, int step, int varied,
                      const std::string& what) {
  const int limit = 53 - precision - block_log2;
  const double big = 2.0 * (2.0 - std::ldexp(1.0, 1 - precision));
  for (const int spread : {limit, limit + 1}) {
    const double small = std::ldexp(1.0 + std::ldexp(1.0, 1 - precision), 1 - spread);
    std::vector<T> row;
    for (int r = 0; r < rounds; ++r) {
      const int run = shortest + (r * step) % varied;
      for (int k = 0; k < run; ++k) row.push_back(of<T>(big));
      row.push_back(of<T>(r % 2 == 0 ? small : -small));
      for (int k = 0; k < run; ++k) row.push_back(of<T>(-big));
    }
    check_row(row, std::string(cumulus::dtype_name(cumulus::dtype_of<T>)) + " " + what + " " +
                       std::to_string(spread));
  }
}

template <class T>
void check_guard_edge(int precision) {
  check_guard_edge<T>(precision, 8, 40, 150, 37, 100, "guard spread");
}

TEST(ExactRows, FloatBlocksAtTheGuardsEdge) { check_guard_edge<float>(24); }
TEST(ExactRows, BFloat16BlocksAtTheGuardsEdge) { check_guard_edge<cumulus::BFloat16>(8); }

// Outputs on bfloat16's midpoints, which the vector stores must round the exact way: 1 + 256 and
// then +-2 in turn, odd integers between 2^8 and 2^9 (ties, to even: 257 down, 259 up); and 1 + 256
// and then -+2^-20 in turn, where 257 - 2^-20 rounds to float as the midpoint 257 but to bfloat16
// down.
TEST(ExactRows, BFloat16OutputsOnMidpoints) {
  using cumulus::BFloat16;
  for (const double small : {2.0, -0x1p-20}) {
    std::vector<BFloat16> row = {of<BFloat16>(1), of<BFloat16>(256)};
    for (int k = 0; k < 6000; ++k) row.push_back(of<BFloat16>(k % 2 == 0 ? small : -small));
    check_row(row, "bfloat16 outputs on midpoints, +-" + std::to_string(std::fabs(small)));
  }
}

// A carry of 2^40 + a half ulp of T there (two terms), then +-2^-20 in turn: each output is the
// tie broken by the small term, which a double beside the carry cannot hold (the blocks' pairs
// must take it in their low part, every lane).
template <class T>
void check_ties_beside_a_carry(int precision) {
  std::vector<T> row = {of<T>(std::ldexp(1.0, 40)), of<T>(std::ldexp(1.0, 40 - precision))};
  for (int k = 0; k < 2000; ++k) row.push_back(of<T>(k % 2 == 0 ? 0x1p-20 : -0x1p-20));
  check_row(row, std::string(cumulus::dtype_name(cumulus::dtype_of<T>)) + " ties beside a carry");
}

TEST(ExactRows, FloatTiesBesideACarry) { check_ties_beside_a_carry<float>(24); }
TEST(ExactRows, BFloat16TiesBesideACarry) { check_ties_beside_a_carry<cumulus::BFloat16>(8); }

// A carry of 2^40 + 2^-40, a block or more of zeros, then a term far below both: the carry after
// that block cannot stay a pair. An exclusive scan's outputs in the block never include the last
// term, so only the carry's own test sees it; runs of every length mod 256 put it last in a block.
// Then the carry is taken back out, leaving the tiny term.
template <class T>
void check_carry_leaving_the_pair() {
  const double tiny = std::ldexp(1.0, -100) * (1 + 0x1p-7);
  std::vector<T> row;
  for (int z = 0; z < 256; ++z) {
    row.push_back(of<T>(0x1p40));
    row.push_back(of<T>(0x1p-40));
    for (int k = 0; k < 256 + z; ++k) row.push_back(of<T>(0.0));
    row.push_back(of<T>(tiny));
    for (int k = 0; k < 3; ++k) row.push_back(of<T>(0.0));
    row.push_back(of<T>(-0x1p40));
    row.push_back(of<T>(-0x1p-40));
    row.push_back(of<T>(-tiny));
  }
  check_row(row,
            std::string(cumulus::dtype_name(cumulus::dtype_of<T>)) + " carry leaving the pair");
}

TEST(ExactRows, FloatCarryLeavingThePair) { check_carry_leaving_the_pair<float>(); }
TEST(ExactRows, BFloat16CarryLeavingThePair) { check_carry_leaving_the_pair<cumulus::BFloat16>(); }

// An infinity or NaN arriving on the fast path; -0 only rows; -0 rows that meet a +0 late.
TEST(ExactRows, Float16SpecialsAndZeros) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const double special : {inf, -inf, std::nan("")}) {
    std::vector<Float16> row(12000, of<Float16>(0.75));
    row[5000] = of<Float16>(special);
    check_row(row, "float16 one special " + std::to_string(special));
  }
  std::vector<Float16> both(12000, of<Float16>(-2.5));
  both[100] = of<Float16>(-inf);
  both[9000] = of<Float16>(inf);
  check_row(both, "float16 -inf then +inf");
  std::vector<Float16> zeros(9000, of<Float16>(-0.0));
  check_row(zeros, "float16 only -0");
  zeros[8500] = of<Float16>(0.0);
  check_row(zeros, "float16 -0 then a +0");
  zeros[8500] = of<Float16>(-0.0);
  zeros[4500] = of<Float16>(1.0);
  zeros[4600] = of<Float16>(-1.0);
  check_row(zeros, "float16 -0 with 1 - 1");
}

// ---- float64 ------------------------------------------------------------------------------------

constexpr double kInf = std::numeric_limits<double>::infinity();

// The row path's NaN: its exact sum's (not IEEE addition's, which would keep an input's payload).
uint64_t row_path_nan() {
  cumulus::detail::ExactSum sum;
  sum.add(std::nan(""));
  return bits(sum.to_double());
}

// A table's chained kernel (where it has one) on the row of n elements at x, out to y, in pieces
// cut a third of the way in scan order and then as long as the kernel takes: each one's carry the
// totals before it, passed as the ops layer's hand-off passes them.
void run_f64_chained(const cumulus::detail::ScanKernels& kernel, const double* x, double* y,
                     std::size_t n, ScanOptions o, bool stream) {
  using cumulus::detail::Carry;
  struct Chain {
    const cumulus::detail::ScanKernels& kernel;
    bool has = false;
    Carry after;
  } chain{kernel};
  const auto handoff = [](void* context, const Carry* totals, std::size_t count, Carry* before) {
    auto& c = *static_cast<Chain*>(context);
    EXPECT_EQ(count, 1u);
    const bool had = c.has;
    if (had) *before = c.after;
    c.after = had ? c.kernel.combine(c.after, totals[0]) : totals[0];
    c.has = true;
    return had;
  };
  constexpr std::size_t kMost = cumulus::detail::kMaxF64ChainedPiece;
  for (std::size_t from = 0, length = std::min(n / 3, kMost); from < n;
       from += length, length = std::min(n - from, kMost)) {
    const std::size_t at = o.reverse ? n - from - length : from;
    kernel.chained({x + at, y + at, length, o.exclusive, o.reverse, stream, handoff, &chain});
  }
}

// The row kernels of every table on x[offset, end) (and the chained ones, in two pieces): every
// direction, in place and not, streamed and not, bit for bit (NaN too) against the exact sums.
void check_f64_kernels(const std::vector<double>& x, std::size_t offset, const std::string& what) {
  const std::size_t n = x.size() - offset;
  for (const ScanOptions o : kAllOptions) {
    std::vector<uint64_t> want(n);
    exact::Sum sum;
    for (std::size_t s = 0; s < n; ++s) {
      const std::size_t i = o.reverse ? n - 1 - s : s;
      if (!o.exclusive) sum.add(x[offset + i]);
      want[i] = sum.round_bits(exact::kBinary64);
      if (o.exclusive) sum.add(x[offset + i]);
      if (nan_bits(want[i], exact::kBinary64)) want[i] = row_path_nan();
    }
    for (const KernelTable* table : tables()) {
      const auto& kernel = table->cumsum[static_cast<int>(cumulus::DType::kFloat64)];
      for (const bool chained : {false, true}) {
        if (chained && kernel.chained == nullptr) continue;
        for (const bool in_place : {false, true}) {
          for (const bool stream : {false, true}) {
            std::vector<double> y = in_place ? x : std::vector<double>(x.size(), -7.0);
            const double* in = (in_place ? y.data() : x.data()) + offset;
            if (chained) {
              run_f64_chained(kernel, in, y.data() + offset, n, o, stream);
            } else {
              kernel.rows({in, y.data() + offset, 1, n, o.exclusive, o.reverse, nullptr, stream});
            }
            for (std::size_t i = 0; i < n; ++i) {
              if (bits(y[offset + i]) == want[i]) continue;
              ADD_FAILURE() << what << " (" << table->isa << (chained ? " chained" : "")
                            << ", offset " << offset << (o.exclusive ? ", exclusive" : "")
                            << (o.reverse ? ", reverse" : "") << (in_place ? ", in place" : "")
                            << (stream ? ", streamed" : "") << "): output " << i << " has bits 0x"
                            << std::hex << bits(y[offset + i]) << ", exact 0x" << want[i];
              return;
            }
          }
        }
      }
    }
  }
}

// Through cumulus::cumsum (every tuning, one and two threads) and the kernels directly, the
// row starting at each of the first `offsets` elements (its blocks then meet the data, and 64-byte
// lines, at other places).
void check_f64_row(const std::vector<double>& x, const std::string& what, std::size_t offsets = 8) {
  for (const int threads : {1, 2}) {
    const ScopedThreads scoped(threads);
    check_row(x, what + ", " + std::to_string(threads) + " threads");
  }
  for (std::size_t offset = 0; offset < offsets && offset < x.size(); ++offset) {
    check_f64_kernels(x, offset, what);
  }
}

// x followed by its mirror image: each direction first meets x in its own order.
std::vector<double> mirrored(std::vector<double> x) {
  x.insert(x.end(), x.rbegin(), x.rend());
  return x;
}

// Large terms taken back out two places later, small terms between them: an output after each
// large term's return is the exact sum of the small terms so far, so a low bit lost anywhere
// shows. Small terms down to 2^-40 leave every prefix within a pair; down to 2^-75 they do not
// always, so blocks fail here and there. Every length around the blocks' groups and sizes.
TEST(ExactRows, Float64CancellationsAtEveryLength) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> mantissa(1, 2);
  for (const int low : {-40, -75}) {
    std::uniform_int_distribution<int> big_exponent(0, 20), small_exponent(low, -25);
    for (const std::size_t n : {1,   2,   7,   8,   9,   17,   40,   65,   100,  127,  128,
                                129, 255, 256, 257, 300, 2047, 2048, 2049, 2113, 4160, 6001}) {
      std::vector<double> row(n);
      double big = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double sign = rng() % 2 == 0 ? 1 : -1;
        if (i % 4 == 0) big = sign * std::ldexp(mantissa(rng), big_exponent(rng));
        row[i] = i % 4 == 0   ? big
                 : i % 4 == 2 ? -big
                              : sign * std::ldexp(mantissa(rng), small_exponent(rng));
      }
      check_f64_row(row, "float64 cancellations to 2^" + std::to_string(low) + ", length " +
                             std::to_string(n));
    }
  }
}

// Events a block and a bit apart (so they meet a block at places all through it in turn) that only
// one of a block's exactness tests sees:
// - a segment's own sum, not the row's prefix, outgrows a pair: from a carry of -1, +1 and then
//   2^-60, 2^-130 and -2^-60 each 8 places on (one lane of a segment's totals) leave 2^-130, which
//   shows; then it goes back to -1;
// - the segments' carries: from a carry of 1 + 2^-60, a segment holding -1 and then 2^-120 has a
//   total whose low part, beside the carry's, a pair cannot hold in its low parts, though the
//   prefix is 2^-60 + 2^-120; 2^-60 taken out a segment later shows the rest;
// - a lane's chain: from the same carry, 2^-130, -1 and -2^-60 leave 2^-130 (shown), which a pair
//   beside 1 + 2^-60 cannot hold; 2^-130 leaves again in the same lane of the segment's totals, so
//   those and the carries are pairs throughout.
TEST(ExactRows, Float64FailuresOfEachTest) {
  constexpr std::size_t kSpacing = 2048 + 85;
  std::vector<double> lane = {-1};
  std::vector<double> carry = {1, 0x1p-60};
  for (int e = 0; e < 25; ++e) {
    const std::size_t at = lane.size() + 5;
    lane.resize(at + kSpacing, 0.0);
    const double terms[] = {1, 0x1p-60, 0x1p-130, -0x1p-60, -0x1p-130, -1};
    for (int k = 0; k < 6; ++k) lane[at + 8 * k] = terms[k];
    const std::size_t c = carry.size() + 5;
    carry.resize(c + kSpacing, 0.0);
    carry[c] = -1;
    carry[c + 1] = 0x1p-120;
    carry[c + 300] = -0x1p-60;
    carry[c + 301] = -0x1p-120;
    carry[c + 302] = 1;
    carry[c + 303] = 0x1p-60;
    const std::size_t p = carry.size() + 5;
    carry.resize(p + kSpacing, 0.0);
    const double chain[] = {0x1p-130, -1, -0x1p-60, 1, 0x1p-60};
    for (int k = 0; k < 5; ++k) carry[p + k] = chain[k];
    carry[p + 8] = -0x1p-130;
  }
  check_f64_row(mirrored(lane), "float64 a segment's lane outgrowing a pair", 2);
  check_f64_row(mirrored(carry), "float64 segment carries and lane chains outgrowing a pair", 2);
}

// Rows past the bound of the float64 blocks' plain low parts (f64_plain_fits: low + n u S against
// 2^(q + 52), q the exponent of a grid every term and the carry are on, n = 256 terms a chain), in
// two kinds, from a carry near 1:
// - terms t = 2^-47 + r, r in [2^-54, 2^-53) a multiple of 2^-99: each pair step keeps r whole in
//   the low part (hi + t rounds to hi + 2^-47), which outgrows 2^(-99 + 53) after about 170 of
//   them; 2^-45 against 2^-47, a factor 4 over;
// - a carry 1 + 2^-110 and terms 2^-44 + r, r in [2^-60, 2^-59) a multiple of 2^-96: the lanes'
//   low parts drop the carry's 2^-110 once they pass 2^-57; the terms alone would pass the bound
//   (2^-45 against 2^-44), the carry's last bit takes q to -110.
// The carry comes first, then zeros to 2048 terms, then the terms. Every 16 places two probes bring
// the exact prefix (less its bits below the terms' grid) to a tie at double's precision, the
// neighbour below even at the first and odd at the second: a low part that lost a bit rounds some
// of them the wrong way. Values are counted in units of 2^-110.
using Units = __int128;
constexpr int kUnitExponent = -110;

double from_units(Units u) {
  const double v = std::ldexp(static_cast<double>(u), kUnitExponent);
  EXPECT_EQ(static_cast<Units>(std::ldexp(v, -kUnitExponent)), u) << "not a double";
  return v;
}

struct PastPlainBound {
  const char* what;
  std::vector<double> carry;  // summing to 1 + a multiple of 2^-110 below 2^-52
  int term, grid, low;        // terms 2^term + r, r a multiple of 2^grid in [2^low, 2^(low + 1))
};

const PastPlainBound kPastPlainBound[] = {
    {"low parts a factor 4 past the plain bound", {1}, -47, -99, -54},
    {"a carry's last bit below the terms' grid", {1, 0x1p-110}, -44, -96, -60},
};

Units units(int exponent) { return Units{1} << (exponent - kUnitExponent); }

std::vector<double> past_plain_bound_row(const PastPlainBound& c, std::size_t n,
                                         std::mt19937_64& rng) {
  const Units grid = units(c.grid), spacing = units(-52), half = units(-53);
  std::uniform_int_distribution<uint64_t> low(uint64_t{1} << (c.low - c.grid),
                                              (uint64_t{2} << (c.low - c.grid)) - 1);
  std::vector<double> row = c.carry;
  row.resize(2048, 0.0);  // a block after it starts from the carry, the row's only pair of it
  Units prefix = 0;
  for (const double v : c.carry) prefix += static_cast<Units>(std::ldexp(v, -kUnitExponent));
  while (row.size() < n) {
    const std::size_t i = row.size();
    // The first 16 terms have 2^-52 for r, which the pairs add exactly: a block may start among
    // them (after the row's first block, of zeros and up to 9 terms, at any offset), its carry
    // still a pair with the row's carry's low part.
    const Units r = static_cast<Units>(low(rng)) * grid;
    Units term = units(c.term) + (i < 2048 + 16 ? units(-52) : r);
    if (i % 16 == 8 || i % 16 == 9) {
      // The first tie at least 2^term above the prefix on the grid whose lower neighbour (a
      // multiple of 2^-52 in [1, 2)) is even at place 8, odd at place 9.
      const Units on_grid = prefix - prefix % grid;
      Units tie = (on_grid + units(c.term)) / spacing * spacing + half;
      if (tie < on_grid + units(c.term)) tie += spacing;
      if (((tie - half) / spacing % 2 == 0) != (i % 16 == 8)) tie += spacing;
      term = tie - on_grid;
    }
    row.push_back(from_units(term));
    prefix += term;
  }
  return row;
}

// A carry 1 + 2^-110, zeros to 2048 terms, then periods of 256 terms of 1.5 2^-44 + r: r = 2^-52
// (which the pairs add exactly) for 16, r in [2^-64, 2^-63) a random multiple of 2^-96 for 96, a
// probe and its negation, the same r negated in reverse order, and r = 2^-52 again. A block's
// segments start 2 to 9 places into a period, where the prefix is a pair (1 + 2^-110 beside
// multiples of 2^-52), so the blocks' starts hold; in the middle a chain's low part passes 2^-57
// and has no room for the 2^-110. The terms' grid (2^-96) alone would let the low parts go plain
// (2^-45 against 2^-44); the carry's last bit must not. The probe z = k 2^-52 + 2^-53 - R, R the
// r so far, k 256 or 257 so that hi + k 2^-52 is even (hi the prefix's multiple of 2^-52), leaves
// the exact prefix 2^-110 above a tie whose neighbour below is even: a chain that lost the
// 2^-110 (a low part of a few 2^-57 rounds it away) rounds the tie down.
std::vector<double> carry_bit_row(std::size_t periods, std::mt19937_64& rng) {
  const Units grid = units(-96), ulp = units(-52), term = 3 * units(-45);
  std::uniform_int_distribution<uint64_t> low(uint64_t{1} << 32, (uint64_t{2} << 32) - 1);
  std::vector<double> row = {1, 0x1p-110};
  row.resize(2048, 0.0);
  Units high = units(0);  // the prefix's multiple of 2^-52, less the carry's 2^-110
  for (std::size_t p = 0; p < periods; ++p) {
    for (int k = 0; k < 16; ++k) row.push_back(from_units(term + ulp));
    high += 16 * (term + ulp);
    std::vector<Units> r(96);
    Units sum = 0;
    for (Units& v : r) {
      v = static_cast<Units>(low(rng)) * grid;
      row.push_back(from_units(term + v));
      sum += v;
    }
    high += 96 * term;
    const Units k = (high / ulp + 256) % 2 == 0 ? 256 : 257;
    const Units z = k * ulp + units(-53) - sum;
    row.push_back(from_units(z));
    row.push_back(from_units(-z));
    for (auto v = r.rbegin(); v != r.rend(); ++v) row.push_back(from_units(term - *v));
    high += 96 * term;
    for (int k = 0; k < 256 - 16 - 96 - 2 - 96; ++k) row.push_back(from_units(term + ulp));
    high += (256 - 16 - 96 - 2 - 96) * (term + ulp);
  }
  return row;
}

TEST(ExactRows, Float64PastThePlainBound) {
  std::mt19937_64 rng(17);
  check_f64_row(mirrored(past_plain_bound_row(kPastPlainBound[0], 4 * 2048 + 40, rng)),
                std::string("float64 ") + kPastPlainBound[0].what);
  check_f64_row(mirrored(carry_bit_row(24, rng)), "float64 a carry's last bit below the grid");
  // The same rows' carries and terms without the zeros between them: rows too short for blocks,
  // which go a vector at a time where their bound allows.
  for (const PastPlainBound& c : kPastPlainBound) {
    const std::vector<double> row = past_plain_bound_row(c, 2048 + 250, rng);
    for (const std::size_t n : {std::size_t{30}, std::size_t{250}}) {
      std::vector<double> short_row = c.carry;
      short_row.insert(short_row.end(), row.begin() + 2048, row.begin() + 2048 + n);
      check_f64_row(short_row, std::string("float64, short row, ") + c.what);
    }
  }
  std::vector<double> periods = carry_bit_row(2, rng);
  periods.erase(periods.begin() + 2, periods.begin() + 2048);
  check_f64_row(periods, "float64, short row, a carry's last bit below the grid");
}

// Rows for f64_run's split: n terms b = 1 + U - 2^-52 (U = 2^(E - 52), E the split's place for
// a piece whose magnitudes sum to about 2 n), each leaving nearly U below the split, so the low
// parts' sum climbs to about n U; then a term t of 53 bits, the last 2^(E - d) (the certificate's
// grid is the smallest term's last place); then n terms -b taking it all back. The last output
// is t itself, whose last bit a low part rounded on the way loses: for n = 511 the low parts'
// sums stay doubles up to d of about 96, and the split's certificate allows d <= 94, so past it
// the rows go the scalar way. Every d around both. (Checked: a certificate allowing d <= 97
// fails here.)
TEST(ExactRows, Float64RunsAroundTheSplitBound) {
  for (const int n : {8, 100, 511}) {
    const int E = std::bit_width(static_cast<unsigned>(2 * n)) + 1;  // 2^E >= 2 S, as the kernel's
    const double b = 1 + std::ldexp(1.0, E - 52) - 0x1p-52;
    for (int d = 88; d <= 100; ++d) {
      std::vector<double> row(static_cast<std::size_t>(n), b);
      row.push_back(std::ldexp(0x1.fffffffffffffp0, E - d + 52));
      row.insert(row.end(), static_cast<std::size_t>(n), -b);
      check_f64_row(row, "float64 split at 2^" + std::to_string(E) + ", " + std::to_string(n) +
                             " terms each way, the last bit 2^" + std::to_string(E - d) +
                             " between");
    }
  }
}

// The same terms after the carry in every lane (and zeros to the end of the lanes' first 2048
// elements), through each table's total kernel, whose lanes take 2048 elements at a time with
// plain low parts where their bound allows: the total must be the exact one. It is no pair here,
// so the check is its own exact sum with every term negated (ExactSum, tested against exact::Sum
// in test_exact_state.cc), which must be zero.
TEST(ExactRows, Float64TotalsPastThePlainBound) {
  std::mt19937_64 rng(19);
  for (const PastPlainBound& c : kPastPlainBound) {
    std::vector<double> x;
    for (const double v : c.carry) x.insert(x.end(), 8, v);
    x.resize(2048, 0.0);
    const std::vector<double> terms = past_plain_bound_row(c, 5 * 2048, rng);
    x.insert(x.end(), terms.begin() + 2048, terms.end());
    for (const std::size_t n : {x.size(), x.size() - 77}) {
      for (const KernelTable* table : tables()) {
        auto carry = table->cumsum[static_cast<int>(cumulus::DType::kFloat64)].total(x.data(), n);
        for (std::size_t i = 0; i < n; ++i) carry.sum.add(-x[i]);
        EXPECT_EQ(carry.sum.to_double(), 0.0)
            << c.what << " (" << table->isa << ", " << n << " terms)";
      }
    }
  }
}

// An infinity or a NaN in each segment and lane of a block; both infinities; a sum past the
// largest double and back; -0 only, -0 then a +0 late, -0 around 1 - 1 (whose exact zeros are +0).
TEST(ExactRows, Float64SpecialsAndZeros) {
  for (const double special : {kInf, -kInf, std::nan("")}) {
    for (const std::size_t at : {8, 9, 300, 1000, 2055, 2100, 4000}) {
      std::vector<double> row(4200, 0.75);
      row[at] = special;
      check_f64_row(row, "float64 " + std::to_string(special) + " at " + std::to_string(at));
    }
  }
  std::vector<double> both(5000, -2.5);
  both[100] = -kInf;
  both[3000] = kInf;
  check_f64_row(both, "float64 -inf then +inf");
  const double large = 0x1.8p1023;
  std::vector<double> past(5000, 1.0);
  past[1500] = large;
  past[1700] = large;
  past[1900] = -large;
  past[3000] = -large;
  check_f64_row(past, "float64 past the largest double and back");
  std::vector<double> zeros(3000, -0.0);
  check_f64_row(zeros, "float64 only -0");
  zeros[2500] = 0.0;
  check_f64_row(zeros, "float64 -0 then a +0");
  zeros[2500] = -0.0;
  zeros[700] = 1.0;
  zeros[1200] = -1.0;
  check_f64_row(zeros, "float64 -0 with 1 - 1");
}

// The vector layers' fused blocks lie at multiples of 2048 in memory (the row's first term goes
// alone), so a row whose first 2048 terms set a carry puts a block of the test's own at
// [2048, 4096) on the default tuning; a row of a multiple of 2048 terms, reversed, does the same
// for the reverse scans.
constexpr std::size_t kFusedStart = 2048;
constexpr std::size_t kFusedBlock = 2048;

template <class T>
void check_both_ways(std::vector<T> row, const std::string& what) {
  check_row(row, what);
  std::reverse(row.begin(), row.end());
  check_row(row, what + ", reversed");
}

// Terms setting the carry (then zeros up to the block), the block, then the carry and the block's
// sum taken back out term by term, and a tail that shows whatever is left.
template <class T>
std::vector<T> carry_then_block(const std::vector<double>& carry, const std::vector<double>& block,
                                const std::vector<double>& removal) {
  std::vector<T> row;
  for (const double v : carry) row.push_back(of<T>(v));
  row.resize(kFusedStart, of<T>(0.0));
  for (const double v : block) row.push_back(of<T>(v));
  for (const double v : removal) row.push_back(of<T>(v));
  for (int k = 0; k < 300 || row.size() % kFusedBlock != 0; ++k) {
    row.push_back(of<T>(k % 3 == 0 ? 0x1p-30 : 0.0));
  }
  return row;
}

// float blocks of 2047 x (2 - 2^-22) and 1 + 2^-23: the unit 2^-23 and partial sums below 2^12,
// so a carry c qualifies while |c| <= 2^30 - 2^12. At the bound the block goes the fused way; one
// unit past and far past (where c + P passes 2^30 and drops the unit) it goes the exact way; all
// must be exact, which the sum left after the removal shows.
TEST(ExactRows, FloatFusedCarryAtTheBound) {
  std::vector<double> block(kFusedBlock - 1, 2 - 0x1p-22);
  block.push_back(1 + 0x1p-23);
  const double block_sum = 2047 * (2 - 0x1p-22) + 1 + 0x1p-23;
  const std::vector<double> removal = {-4094, -1, 4093 * 0x1p-23};
  ASSERT_EQ(-4094 - 1 + 4093 * 0x1p-23, -block_sum);
  const struct {
    std::vector<double> carry;
    const char* what;
  } cases[] = {
      {{0x1p30, -0x1p12}, "at the bound"},
      {{0x1p30, -0x1p12, 0x1p-23}, "one unit past"},
      {{0x1p30, -0x1p11}, "far past"},
  };
  for (const auto& c : cases) {
    std::vector<double> out = removal;
    for (const double v : c.carry) out.push_back(-v);
    check_both_ways(carry_then_block<float>(c.carry, block, out),
                    std::string("float fused carry ") + c.what);
  }
}

// A carry 2^29 - 2^11 + 2^-24, half a unit off the block's multiples of 2^-23: the block goes the
// fused way from 2^29 - 2^11 with 2^-24 set aside, which breaks the ties that 2^29 - 2^11 plus
// multiples of 32 make at float's precision, and stays exact past 2^29.
TEST(ExactRows, FloatFusedCarryOffTheUnit) {
  std::vector<double> block(kFusedBlock - 1, 32);
  block.push_back(1 + 0x1p-23);
  const std::vector<double> carry = {0x1p29, -0x1p11, 0x1p-24};
  const std::vector<double> removal = {-0x1p29, 0x1p11, -65504, -(1 + 0x1p-23)};
  check_both_ways(carry_then_block<float>(carry, block, removal), "float fused carry off the unit");
}

// A carry C + t (C of T's precision in [2^(e+2), 2^(e+3))), then blocks of terms in
// +-[2^e, 2^(e+1)) in random directions, whose unit is 2^u, u = e + 1 - p. The first trials take
// |t| below half C's last bit, so the pair keeps it apart; the others a T in [2^(u-1), 2^u), which
// the fused pass splits off C + t as the part below 2^u. The pass rounds an output C + P + t as
// C + P moved one double toward t where |C + P| >= 2^(e+2) with C's sign, else to odd with t: the
// partial sums wander across that bound and across zero, a quarter of the outputs in
// [2^(e+2), 2^(e+3)) sit on a midpoint of T, which t's sign decides, and below the bound a t past
// half the unit moves an output across one.
template <class T>
void check_fused_low_part(int precision) {
  std::mt19937_64 rng(20261202);
  const auto mantissa = [&] {  // an integer of `precision` bits
    return static_cast<double>((int64_t{1} << (precision - 1)) +
                               static_cast<int64_t>(rng() % (uint64_t{1} << (precision - 1))));
  };
  for (int trial = 0; trial < 24; ++trial) {
    const int e = trial % 3 == 0 ? 0 : trial % 3 == 1 ? -20 : 30;
    const int u = e + 1 - precision;
    const double c_sign = trial % 2 == 0 ? 1 : -1, t_sign = trial % 4 < 2 ? 1 : -1;
    const double t =
        trial < 12 ? std::ldexp(1.0, e - 52 - trial) : std::ldexp(mantissa(), u - precision);
    std::vector<T> row = {of<T>(c_sign * std::ldexp(mantissa(), e + 3 - precision)),
                          of<T>(t_sign * t)};
    row.resize(kFusedStart, of<T>(0.0));
    for (std::size_t k = 0; k < 3 * kFusedBlock + 100; ++k) {
      row.push_back(of<T>((rng() % 2 == 0 ? 1 : -1) * std::ldexp(mantissa(), e + 1 - precision)));
    }
    while (row.size() % kFusedBlock != 0) row.push_back(of<T>(0.0));
    check_row(row, std::string(cumulus::dtype_name(cumulus::dtype_of<T>)) +
                       " carry's low part, e " + std::to_string(e) + ", trial " +
                       std::to_string(trial));
  }
}

TEST(ExactRows, FloatFusedCarryLowPart) { check_fused_low_part<float>(24); }
TEST(ExactRows, BFloat16FusedCarryLowPart) { check_fused_low_part<cumulus::BFloat16>(8); }

// Blocks of 2048 terms in +-[1/2, 1) with full mantissas, each holding one term in
// [2^(p - 44), 2^(p - 43)), whose unit is 2^-43: a whole block's partial sums are bounded by 2^11
// beyond 2^(-43 + 53), which leaves fused_carry no room for any carry. The carry C + t, then:
// C in [128, 256) (kNear) keeps every running sum below 2^9, where the whole block's guessed pass
// holds by what it wrote (fused_pass_exact) while t is 0; C in [576, 640) (kFar) puts them past
// it, and the blocks go fused in 256-term pieces, whose sums are bounded by 2^8, leaving C up to
// 2^10 - 2^8 (exact_row); C in [1088, 1152) (kPast) puts them past 2^10, where a plain pass would
// round, so neither may hold. t is 0, a low part far below C's last bit (kept in the pair), or in
// [2^-44, 2^-43), below the unit, which the pass splits off as the part it rounds with (nudged or
// to odd): both not the plain pass, so the pieces take them either way.
enum class CarryPlace { kNear, kFar, kPast };

template <class T>
void check_fused_small_unit(int precision, CarryPlace place) {
  std::mt19937_64 rng(20261206 + static_cast<int>(place));
  const auto mantissa = [&] {  // an integer of `precision` bits
    return static_cast<double>((int64_t{1} << (precision - 1)) +
                               static_cast<int64_t>(rng() % (uint64_t{1} << (precision - 1))));
  };
  const auto sign = [&] { return rng() % 2 == 0 ? 1.0 : -1.0; };
  for (int trial = 0; trial < 12; ++trial) {
    const double c_sign = trial % 2 == 0 ? 1 : -1;
    const double t = trial < 4   ? 0
                     : trial < 8 ? sign() * std::ldexp(1.0, -60 - trial)
                                 : sign() * std::ldexp(mantissa(), -44 - precision + 1);
    std::vector<T> row;
    if (place == CarryPlace::kNear) {
      row.push_back(of<T>(c_sign * std::ldexp(mantissa(), 8 - precision)));
    } else {
      row.push_back(of<T>(c_sign * (place == CarryPlace::kFar ? 512 : 1024)));
      row.push_back(of<T>(c_sign * std::ldexp(mantissa(), 7 - precision)));
    }
    if (t != 0) row.push_back(of<T>(t));
    row.resize(kFusedStart, of<T>(0.0));
    for (int block = 0; block < 4; ++block) {
      const std::size_t start = row.size(), at = start + rng() % kFusedBlock;
      for (std::size_t k = 0; k < kFusedBlock; ++k) {
        const double term =
            start + k == at ? std::ldexp(mantissa(), -43) : std::ldexp(mantissa(), -precision);
        row.push_back(of<T>(sign() * term));
      }
    }
    check_both_ways(row, std::string(cumulus::dtype_name(cumulus::dtype_of<T>)) +
                             " blocks of a fine unit, carry place " +
                             std::to_string(static_cast<int>(place)) + ", trial " +
                             std::to_string(trial));
  }
}

TEST(ExactRows, FloatFusedSmallUnit) {
  for (const auto place : {CarryPlace::kNear, CarryPlace::kFar, CarryPlace::kPast}) {
    check_fused_small_unit<float>(24, place);
  }
}
TEST(ExactRows, BFloat16FusedSmallUnit) {
  for (const auto place : {CarryPlace::kNear, CarryPlace::kFar, CarryPlace::kPast}) {
    check_fused_small_unit<cumulus::BFloat16>(8, place);
  }
}

// A carry C = +-2^40 far above its blocks (fused_far): terms +-k g (k in 1..3, mostly up, so the
// partial sums P climb across T's midpoints beside C: g is the midpoint offset 2^(40 - p), or
// 2^24 where that is too large for the blocks to lie far below C), and in each block a pair
// +-(a + a 2^(1 - p)), -+a with a = 2^(p - 14): its net 2^-13 is half a double at C, so C + P + the
// pairs so far falls on a midpoint or within a double of one, where RN(C + P) cannot stand for
// the exact output and the pass must take the exact way; the net parts pile up in the carry's low
// part. Then the same with the blocks' pairs left out.
template <class T>
void check_fused_far(int precision) {
  std::mt19937_64 rng(20261203);
  const double g = std::ldexp(1.0, std::min(40 - precision, 24));
  const double a = std::ldexp(1.0, precision - 14);
  const double a_tiny = a + std::ldexp(a, 1 - precision);
  for (int trial = 0; trial < 8; ++trial) {
    const double c_sign = trial % 2 == 0 ? 1 : -1;
    std::vector<T> row = {of<T>(c_sign * 0x1p40)};
    row.resize(kFusedStart, of<T>(0.0));
    for (int block = 0; block < 4; ++block) {
      const std::size_t pair_at = row.size() + rng() % (kFusedBlock - 1);
      const double pair_sign = rng() % 2 == 0 ? 1 : -1;
      for (std::size_t k = 0; k < kFusedBlock; ++k) {
        const std::size_t i = row.size();
        if (trial < 6 && i == pair_at) {
          row.push_back(of<T>(pair_sign * a_tiny));
        } else if (trial < 6 && i == pair_at + 1) {
          row.push_back(of<T>(-pair_sign * a));
        } else {
          const double up = rng() % 3 != 0 ? c_sign : -c_sign;
          row.push_back(of<T>(up * static_cast<double>(1 + rng() % 3) * g));
        }
      }
    }
    check_both_ways(row, std::string(cumulus::dtype_name(cumulus::dtype_of<T>)) +
                             " carry far above its blocks, trial " + std::to_string(trial));
  }
}

TEST(ExactRows, FloatFusedCarryFarAbove) { check_fused_far<float>(24); }
TEST(ExactRows, BFloat16FusedCarryFarAbove) { check_fused_far<cumulus::BFloat16>(8); }

// A long scan of positive terms with full mantissas (uniform in [0, 1)): past ~2^19 its carry is
// too large for c + P to be exact beside the blocks' units, and the blocks take the far way.
TEST(ExactRows, FloatLongPositiveScan) {
  std::mt19937_64 rng(20261204);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::vector<float> row(std::size_t{3} << 20);
  for (float& v : row) v = static_cast<float>(uniform(rng));
  check_row(row, "float long positive scan");
}

// Runs of ~2000 large terms around one small one `spread` binades lower, its last bit set: at the
// fused blocks' limit (53 - p - 11 binades) every partial sum is a double; one binade more, and the
// runs' partial sums near 2^13 cannot hold the small term's last bit.
template <class T>
void check_fused_guard_edge(int precision) {
  check_guard_edge<T>(precision, 11, 12, 1900, 53, 140, "fused guard spread");
}

TEST(ExactRows, FloatFusedBlocksAtTheGuardsEdge) { check_fused_guard_edge<float>(24); }
TEST(ExactRows, BFloat16FusedBlocksAtTheGuardsEdge) {
  check_fused_guard_edge<cumulus::BFloat16>(8);
}

// Rows whose blocks' ranges leave the range the fused pass guessed for them (out of place it scans
// a block first and checks its range after, planning from the widest range the carry allows): a
// carry of 2^20, then blocks of terms in +-[1/2, 1) with full mantissas, where some blocks (runs
// of them, so the guessing pauses and resumes) hold one term of +-2^(p-36) (1 + 2^(1-p)), signs
// alternating, whose last bit 2^-35 lies below the guess's unit, or one of +-32 above the largest
// seen. Then the carry and every other term taken back out, so the tail shows the small terms' sum,
// whose last bit a block scanned under the wrong plan would lose.
template <class T>
void check_fused_guesses_missing(int precision) {
  std::mt19937_64 rng(20261204);
  const double small = std::ldexp(1 + std::ldexp(1.0, 1 - precision), precision - 36);
  const auto term = [&] {  // +-[1/2, 1), `precision` bits
    const double m = std::ldexp(static_cast<double>((uint64_t{1} << (precision - 1)) +
                                                    rng() % (uint64_t{1} << (precision - 1))),
                                -precision);
    return rng() % 2 == 0 ? m : -m;
  };
  const auto listed = [](const auto& list, std::size_t block) {
    return std::find(std::begin(list), std::end(list), block) != std::end(list);
  };
  const std::size_t small_blocks[] = {3, 4, 5, 6, 7, 11, 20, 21, 33};  // an odd count
  const std::size_t large_blocks[] = {15, 25, 26};
  std::vector<double> terms;
  std::vector<T> row = {of<T>(0x1p20)};
  row.resize(kFusedStart, of<T>(0.0));
  double small_sign = 1;
  for (std::size_t block = 0; block < 40; ++block) {
    const std::size_t start = terms.size();
    for (std::size_t k = 0; k < kFusedBlock; ++k) terms.push_back(term());
    const std::size_t at = start + rng() % kFusedBlock;
    if (listed(large_blocks, block)) terms[at] = rng() % 2 == 0 ? 32.0 : -32.0;
    for (std::size_t i = start; i < terms.size(); ++i) {
      const bool is_small = i == at && listed(small_blocks, block);
      row.push_back(of<T>(is_small ? small_sign * small : terms[i]));
      if (is_small) {
        small_sign = -small_sign;
        terms[i] = 0;  // not taken back out
      }
    }
  }
  row.push_back(of<T>(-0x1p20));
  for (const double v : terms) row.push_back(of<T>(-v));
  for (int k = 0; k < 300; ++k) row.push_back(of<T>(0.0));
  check_both_ways(row, std::string(cumulus::dtype_name(cumulus::dtype_of<T>)) +
                           " blocks outside their guessed range");
}

TEST(ExactRows, FloatFusedGuessesMissing) { check_fused_guesses_missing<float>(24); }
TEST(ExactRows, BFloat16FusedGuessesMissing) { check_fused_guesses_missing<cumulus::BFloat16>(8); }

// Rows where the fused pass, out of place, guesses a block's way before it knows the block's range:
// the far way (RN(hi + P), fused_far) after a block that went it, and back where a block had a
// plan. A carry of 2^(74 - p), far above blocks of terms in +-[1/2, 1) with full mantissas (c + P
// would need 74 bits); some blocks (listed) hold one term of +-2^-44 (1 + 2^(1 - p)), whose last
// bit leaves the block's partial sums no double (the far way fails after its pass), some only
// terms of +-2^22 or 1.5 times that, which leave the carry a plan (the next block guesses by
// range), and late ones one term of +-2^(71 - p), which keeps the carry no longer far above them.
// Then the carry and every term but the small ones taken back out, so the tail shows their sum,
// which a block whose carry after it was not exact would lose. One trial with a NaN in a late
// block.
template <class T>
void check_fused_guesses_far(int precision) {
  const std::string name(cumulus::dtype_name(cumulus::dtype_of<T>));
  std::mt19937_64 rng(20261206);
  const double carry = std::ldexp(1.0, 74 - precision);
  const double small = std::ldexp(1 + std::ldexp(1.0, 1 - precision), -44);
  const double coarse = 0x1p22;
  const auto sign = [&] { return rng() % 2 == 0 ? 1.0 : -1.0; };
  const auto term = [&] {  // +-[1/2, 1), `precision` bits
    return sign() * std::ldexp(static_cast<double>((uint64_t{1} << (precision - 1)) +
                                                   rng() % (uint64_t{1} << (precision - 1))),
                               -precision);
  };
  const auto listed = [](const auto& list, std::size_t block) {
    return std::find(std::begin(list), std::end(list), block) != std::end(list);
  };
  const std::size_t small_blocks[] = {5, 12, 13, 24};
  const std::size_t coarse_blocks[] = {9, 16, 17, 27};
  const std::size_t large_blocks[] = {31, 36};
  for (const bool with_nan : {false, true}) {
    std::vector<double> terms;
    std::vector<T> row = {of<T>(carry)};
    row.resize(kFusedStart, of<T>(0.0));
    for (std::size_t block = 0; block < 40; ++block) {
      const std::size_t start = terms.size();
      for (std::size_t k = 0; k < kFusedBlock; ++k) {
        terms.push_back(listed(coarse_blocks, block) ? sign() * coarse * (1 + 0.5 * (rng() % 2))
                                                     : term());
      }
      const std::size_t at = start + rng() % kFusedBlock;
      if (listed(large_blocks, block)) terms[at] = sign() * std::ldexp(1.0, 71 - precision);
      for (std::size_t i = start; i < terms.size(); ++i) {
        const bool is_small = i == at && listed(small_blocks, block);
        row.push_back(of<T>(is_small ? sign() * small : terms[i]));
        if (is_small) terms[i] = 0;  // not taken back out
      }
      if (with_nan && block == 34) row[row.size() - 1 - rng() % kFusedBlock] = of<T>(std::nan(""));
    }
    row.push_back(of<T>(-carry));
    for (const double v : terms) row.push_back(of<T>(-v));
    for (int k = 0; k < 300; ++k) row.push_back(of<T>(0.0));
    check_both_ways(row, name + " blocks guessed far" + (with_nan ? ", a NaN" : ""));
  }
}

TEST(ExactRows, FloatFusedGuessesFar) { check_fused_guesses_far<float>(24); }
TEST(ExactRows, BFloat16FusedGuessesFar) { check_fused_guesses_far<cumulus::BFloat16>(8); }

// A carry pair whose low part outgrew half its high part's last place (the scalar way's pair_add
// gathers every term's error in lo) before blocks that go the far way: 2^48 and 2^24, a float
// midpoint, then 254 terms of 0.03, each below half of 2^48's last place (so lo reaches 7.6; the
// range forces the scalar way), then terms of -0.001: every exact output lies above the midpoint,
// RN(hi + P) below it, and from 2 doubles under it on the midpoint test lets it stand unless the
// pair is normalised first.
TEST(ExactRows, FloatFusedFarAfterAnUnevenPair) {
  std::vector<float> row = {0x1p48f, 0x1p24f};
  row.resize(256, 0.03f);
  row.resize(2 * kFusedBlock, -0.001f);
  row.resize(2 * kFusedBlock + 300, 0.0f);
  check_row(row, "float far blocks after an uneven pair");
}

// float rows where the guessed range's plan would round (the carry 1 + 2^-44 has bits below its
// unit) and the fused pass guesses the pass as is (c = hi) instead: blocks of terms in [1/2, 1),
// multiples of 2^-16, each followed by its negation, so the carry comes back to 1 + 2^-44. Past
// 2^9 c + P is no double, and many outputs fall on float's midpoints, where the 2^-44 decides the
// rounding: the guess must fail. And rows of normal terms, where it mostly holds.
TEST(ExactRows, FloatFusedGuessesAsIs) {
  std::mt19937_64 rng(20261207);
  std::vector<float> row = {1.0f, 0x1p-44f};
  row.resize(kFusedStart, 0.0f);
  for (int pair = 0; pair < 6; ++pair) {
    std::vector<float> block;
    for (std::size_t k = 0; k < kFusedBlock; ++k) {
      block.push_back(std::ldexp(static_cast<float>((1 << 15) + rng() % (1 << 15)), -16));
    }
    row.insert(row.end(), block.begin(), block.end());
    for (const float v : block) row.push_back(-v);
  }
  check_both_ways(row, "float blocks on midpoints past a carry of 1 + 2^-44");
  for (const double scale : {1.0, 0x1p-20, 0x1p30}) {
    std::normal_distribution<double> normal(0, scale);
    std::vector<float> terms(std::size_t{1} << 18);
    for (float& v : terms) v = static_cast<float>(normal(rng));
    check_row(terms, "float normal terms, scale " + std::to_string(scale));
  }
}

// An infinity at every position mod 32 (every lane of the range test's 16- and 32-bit lanes and of
// the vectors), -inf and NaN at some, and the opposite one in a block's scalar tail; rows of -0
// that meet terms; a prefix whose exact zero must be +0 through a fused block of -0.
template <class T>
void check_fused_specials_and_zeros() {
  const std::string name(cumulus::dtype_name(cumulus::dtype_of<T>));
  const double inf = std::numeric_limits<double>::infinity();
  for (const double special : {inf, -inf, std::nan("")}) {
    for (std::size_t at = kFusedStart; at < kFusedStart + 32; at += special == inf ? 1 : 7) {
      std::vector<T> row(kFusedStart + 2 * kFusedBlock + 5, of<T>(0.75));
      row[at] = of<T>(special);
      row[row.size() - 2] = of<T>(-special);  // the last block's tail
      check_row(row, name + " special " + std::to_string(special) + " at " + std::to_string(at));
    }
  }
  std::vector<T> zeros(3 * kFusedBlock, of<T>(-0.0));
  check_both_ways(zeros, name + " only -0");
  zeros[2] = of<T>(1.0);
  zeros[3] = of<T>(-1.0);
  check_both_ways(zeros, name + " -0, 1 - 1, -0");
  zeros[5000] = of<T>(0x1p-3);
  check_both_ways(zeros, name + " -0, 1 - 1, -0, a term");
}

TEST(ExactRows, FloatFusedSpecialsAndZeros) { check_fused_specials_and_zeros<float>(); }
TEST(ExactRows, BFloat16FusedSpecialsAndZeros) {
  check_fused_specials_and_zeros<cumulus::BFloat16>();
}
// float16 rows take the integer blocks rather than the fused pass (kFusedRow), at the same places.
TEST(ExactRows, Float16SpecialsAndZerosAtTheFusedPlaces) {
  check_fused_specials_and_zeros<Float16>();
}

}  // namespace
