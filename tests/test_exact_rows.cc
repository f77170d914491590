// The floating CumSum along rows where it takes the fast vector path a block at a time: the guard
// that proves a block's double sums exact, at its boundaries, against the independent exact::Sum
// (exact.h), on every kernel table, with and without long-row pieces (whose carries enter the
// guard), in all four directions.
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

namespace {

using cumulus::ConstTensorView;
using cumulus::Float16;
using cumulus::ScanOptions;
using cumulus::Tensor;
using cumulus::detail::KernelTable;
using cumulus::detail::Tuning;

class ScopedTuning {
 public:
  explicit ScopedTuning(const Tuning& values) { cumulus::detail::set_tuning(values); }
  ~ScopedTuning() { cumulus::detail::set_tuning({}); }
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;
};

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

}  // namespace
