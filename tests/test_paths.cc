// The paths the operators take only past their size thresholds (src/ops/tuning.h): long rows cut
// into pieces over several rounds, column tiles, streamed stores, Sum's row tiles, work split
// between threads. The thresholds are shrunk through the test-only detail::set_tuning, so inputs
// of a few hundred elements take every path, and every element is compared with the independent
// reference in reference.h (integers exactly, floating types by ref::check_float, DESIGN.md's
// promises). One long float32 CumProd row runs at the default thresholds. CTest reruns this
// binary under each CUMULUS_ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cumulus/error.h"
#include "cumulus/ops.h"
#include "ops/sum_same_shape.h"
#include "ops/tuning.h"
#include "reference.h"
#include "scoped.h"

namespace {

using cumulus::ConstTensorView;
using cumulus::DType;
using cumulus::ScanOptions;
using cumulus::Tensor;
using cumulus::TensorView;
using cumulus::detail::Tuning;
using ref::Scan;
using Shape = std::vector<int64_t>;
using Rng = std::mt19937_64;

// ---- Settings for one scope -----------------------------------------------------------------

using cumulus::testing::ScopedThreads;
using cumulus::testing::ScopedTuning;

// Small enough that a few hundred elements take every path. A piece is longer than two vectors
// of the widest kernel (16 int32 lanes) and not a multiple of any width, so pieces have vector
// blocks and remainders and start at every alignment.
constexpr std::size_t kSmallPiece = 37;
constexpr std::size_t kSmallLongRow = 64;
constexpr std::size_t kSmallRound = 3;
Tuning small_tuning() {
  Tuning t;
  t.long_row = kSmallLongRow;
  t.piece = kSmallPiece;
  t.pieces_per_round = kSmallRound;
  t.column_tile = 7;
  t.sum_row_tile = 11;
  t.min_chunk_elements = 1;  // every task its own chunk, so threads share even small inputs
  t.stream_bytes = 0;        // every output not written in place is streamed
  t.stream_every_row = true;
  return t;
}

// ---- Data ---------------------------------------------------------------------------------------

double uniform(Rng& rng, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1p-53;
}

template <class T>
T rounded(double d) {
  return ref::Num<T>::from_double_rounded(d);
}

// Sums: integers over their whole range (so they wrap), floating values in [-1, 1]. Products:
// odd integers (their products never wrap to zero); floating factors +-(1 + k/64), |k| <= 8,
// exact in every type, steered so every product of consecutive factors stays within 2^+-10,
// in range even for float16 however long the row.
template <class T>
std::vector<T> make_data(Scan op, Rng& rng, std::size_t n) {
  std::vector<T> v(n);
  double level = 0;  // log2 of the running product's magnitude
  for (T& e : v) {
    if constexpr (std::is_integral_v<T>) {
      const uint64_t r = rng();
      e = static_cast<T>(op == Scan::kProd ? r | 1u : r);
    } else if (op == Scan::kSum) {
      e = rounded<T>(uniform(rng, -1, 1));
    } else {
      int k = static_cast<int>(rng() % 17) - 8;
      if (level > 4) k = -1 - static_cast<int>(rng() % 8);
      if (level < -4) k = 1 + static_cast<int>(rng() % 8);
      const double f = 1 + k / 64.0;
      level += std::log2(f);
      e = rounded<T>(rng() % 2 != 0 ? -f : f);
    }
  }
  return v;
}

// ---- Running the library ------------------------------------------------------------------------

enum class Layout { kSeparate, kInPlace, kMisaligned };
constexpr Layout kAllLayouts[] = {Layout::kSeparate, Layout::kInPlace, Layout::kMisaligned};
const char* layout_name(Layout l) {
  return l == Layout::kSeparate ? "separate" : l == Layout::kInPlace ? "in place" : "misaligned";
}

template <class T>
void poison(T* p, std::size_t n) {
  std::memset(static_cast<void*>(p), 0xA5, n * sizeof(T));
}
template <class T>
bool same_bits(const T* a, const T* b, std::size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(T)) == 0;
}

// Runs the scan with the given buffers and returns y; checks that a separate input is left
// alone and that nothing is written next to the output.
template <class T>
std::vector<T> run_scan(Scan op, const std::vector<T>& x, const Shape& shape, int64_t axis,
                        ScanOptions o, Layout layout) {
  constexpr DType kType = cumulus::dtype_of<T>;
  const std::size_t n = x.size();
  const auto call = [&](const void* in, void* out) {
    const ConstTensorView xv(kType, shape, in);
    const TensorView yv{kType, shape, out};
    op == Scan::kSum ? cumulus::cumsum(xv, axis, yv, o) : cumulus::cumprod(xv, axis, yv, o);
  };
  // Tensors are 64-byte aligned; one element in, no vector width divides the address.
  const std::size_t shift = layout == Layout::kMisaligned ? 1 : 0;
  Tensor xs(kType, {static_cast<int64_t>(n + 2)});
  poison(xs.data<T>(), n + 2);
  std::copy(x.begin(), x.end(), xs.data<T>() + shift);
  if (layout == Layout::kInPlace) {
    call(xs.data<T>(), xs.data<T>());
    return {xs.data<T>(), xs.data<T>() + n};
  }
  Tensor ys(kType, {static_cast<int64_t>(n + 2)});
  poison(ys.data<T>(), n + 2);
  call(xs.data<T>() + shift, ys.data<T>() + shift);
  EXPECT_TRUE(same_bits(xs.data<T>() + shift, x.data(), n)) << "input modified";
  T fence;
  poison(&fence, 1);
  EXPECT_TRUE(same_bits(ys.data<T>() + shift + n, &fence, 1) &&
              (shift == 0 || same_bits(ys.data<T>(), &fence, 1)))
      << "wrote outside the output";
  return {ys.data<T>() + shift, ys.data<T>() + shift + n};
}

// Sum with the output separate, misaligned (the inputs stay aligned) or over input 0.
// Sum's entries: the public one, and the one without checks that the Python binding calls for
// inputs of one shape.
enum class SumEntry { kChecked, kSameShape };

template <class T>
std::vector<T> run_sum(const std::vector<std::vector<T>>& inputs, const std::vector<Shape>& shapes,
                       const Shape& out, Layout layout, SumEntry entry = SumEntry::kChecked) {
  const auto call = [entry](std::span<const ConstTensorView> views, TensorView y) {
    if (entry == SumEntry::kSameShape) {
      cumulus::detail::sum_same_shape(views, y);
    } else {
      cumulus::sum(views, y);
    }
  };
  constexpr DType kType = cumulus::dtype_of<T>;
  std::vector<Tensor> owned;
  std::vector<ConstTensorView> views;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    owned.emplace_back(kType, shapes[k]);
    std::copy(inputs[k].begin(), inputs[k].end(), owned.back().template data<T>());
    views.push_back(owned.back().view());
  }
  const auto n = static_cast<std::size_t>(ref::count_of(out));
  if (layout == Layout::kInPlace) {
    call(views, owned[0].view());
    return {owned[0].data<T>(), owned[0].data<T>() + n};
  }
  const std::size_t shift = layout == Layout::kMisaligned ? 1 : 0;
  Tensor ys(kType, {static_cast<int64_t>(n + 2)});
  poison(ys.data<T>(), n + 2);
  call(views, TensorView{kType, out, ys.data<T>() + shift});
  T fence;
  poison(&fence, 1);
  EXPECT_TRUE(same_bits(ys.data<T>() + shift + n, &fence, 1) &&
              (shift == 0 || same_bits(ys.data<T>(), &fence, 1)))
      << "wrote outside the output";
  return {ys.data<T>() + shift, ys.data<T>() + shift + n};
}

// ---- Comparing with the reference ---------------------------------------------------------------

// Collects the elements that miss; one failure names how many and shows the first few.
class Misses {
 public:
  void add(std::size_t i, const std::string& message) {
    if (count_++ < 4) shown_ += "\n  element " + std::to_string(i) + ": " + message;
  }
  void report(const std::string& what) const {
    EXPECT_EQ(count_, 0u) << what << ": " << count_ << " elements miss the reference" << shown_;
  }

 private:
  std::size_t count_ = 0;
  std::string shown_;
};

template <class T>
void expect_scan_matches(const std::string& what, Scan op, const std::vector<T>& x,
                         const Shape& shape, int64_t axis, ScanOptions o,
                         const std::vector<T>& got) {
  ASSERT_EQ(got.size(), x.size()) << what;
  Misses misses;
  if constexpr (std::is_integral_v<T>) {
    const std::vector<T> want = ref::scan_int(op, x, shape, axis, o.exclusive, o.reverse);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (got[i] != want[i]) {
        misses.add(i, "got " + std::to_string(got[i]) + ", want " + std::to_string(want[i]));
      }
    }
  } else {
    const std::vector<ref::Exact> want =
        ref::scan_float(op, x, shape, axis, o.exclusive, o.reverse);
    for (std::size_t i = 0; i < x.size(); ++i) {
      // Sums of make_data's values (multiples of 2^-75) are exact in binary128, and CumSum
      // promises them rounded once: bit for bit.
      const std::string miss = op == Scan::kSum ? ref::check_float_exact(got[i], want[i])
                                                : ref::check_float(got[i], want[i]);
      if (!miss.empty()) misses.add(i, miss);
    }
  }
  misses.report(what);
}

template <class T>
void expect_sum_matches(const std::string& what, const std::vector<std::vector<T>>& inputs,
                        const std::vector<Shape>& shapes, const Shape& out,
                        const std::vector<T>& got) {
  // Sum is exact, and binary128 holds these sums exactly (a few multiples of 2^-52 below 1), so
  // each output is the binary128 sum rounded once, bit for bit.
  const std::vector<ref::Exact> want = ref::sum_float(inputs, shapes, out);
  ASSERT_EQ(got.size(), want.size()) << what;
  Misses misses;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::string miss = ref::check_float_exact(got[i], want[i]);
    if (!miss.empty()) misses.add(i, miss);
  }
  misses.report(what);
}

std::string shape_str(const Shape& s) { return cumulus::shape_string(s); }

std::string scan_what(Scan op, DType t, const Shape& shape, int64_t axis, ScanOptions o,
                      Layout layout) {
  return std::string(op == Scan::kSum ? "CumSum " : "CumProd ") +
         std::string(cumulus::dtype_name(t)) + " " + shape_str(shape) + " axis " +
         std::to_string(axis) + " exclusive=" + std::to_string(o.exclusive) +
         " reverse=" + std::to_string(o.reverse) + " " + layout_name(layout);
}

constexpr ScanOptions kAllOptions[] = {{false, false}, {true, false}, {false, true}, {true, true}};
constexpr Scan kBothScans[] = {Scan::kSum, Scan::kProd};
constexpr DType kFloatTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                 DType::kBFloat16};

// visit_dtype for the floating types alone (Sum takes no others).
template <class F>
void visit_float_dtype(DType t, F&& f) {
  cumulus::visit_dtype(t, [&]<class T>(T v) {
    if constexpr (ref::kIsFloat<T>) f(v);
  });
}

// Every dtype, both scans, every attribute combination and layout, over each shape and axis.
void check_every_scan(Rng& rng, const std::vector<std::pair<Shape, int64_t>>& cases,
                      const Layout* layouts, std::size_t num_layouts) {
  for (const DType t : cumulus::kAllDTypes) {
    cumulus::visit_dtype(t, [&]<class T>(T) {
      for (const Scan op : kBothScans) {
        for (const auto& [shape, axis] : cases) {
          const std::vector<T> x =
              make_data<T>(op, rng, static_cast<std::size_t>(ref::count_of(shape)));
          for (const ScanOptions o : kAllOptions) {
            for (std::size_t l = 0; l < num_layouts; ++l) {
              const std::vector<T> got = run_scan(op, x, shape, axis, o, layouts[l]);
              expect_scan_matches(scan_what(op, t, shape, axis, o, layouts[l]), op, x, shape, axis,
                                  o, got);
            }
          }
        }
      }
    });
  }
}

// ---- The tuning hook itself ---------------------------------------------------------------------

std::string error_of(const Tuning& t) {
  try {
    cumulus::detail::set_tuning(t);
  } catch (const cumulus::Error& e) {
    EXPECT_EQ(e.code(), cumulus::ErrorCode::kInvalidArgument);
    return e.what();
  }
  cumulus::detail::set_tuning({});
  return "no error";
}

TEST(Tuning, RejectsValuesNoPathCanUse) {
  Tuning zero_piece;
  zero_piece.piece = 0;
  EXPECT_EQ(error_of(zero_piece), "set_tuning: 'piece' must be at least 1, not 0");
  Tuning zero_tile;
  zero_tile.column_tile = 0;
  EXPECT_EQ(error_of(zero_tile), "set_tuning: 'column_tile' must be at least 1, not 0");
  Tuning zero_chunk;
  zero_chunk.min_chunk_elements = 0;
  EXPECT_EQ(error_of(zero_chunk), "set_tuning: 'min_chunk_elements' must be at least 1, not 0");
  Tuning zero_sum_tile;
  zero_sum_tile.sum_row_tile = 0;
  EXPECT_EQ(error_of(zero_sum_tile), "set_tuning: 'sum_row_tile' must be at least 1, not 0");
  Tuning zero_round;
  zero_round.pieces_per_round = 0;
  EXPECT_EQ(error_of(zero_round), "set_tuning: 'pieces_per_round' must be at least 1, not 0");
  Tuning wide_round;
  wide_round.pieces_per_round = cumulus::detail::kMaxPiecesPerRound + 1;
  EXPECT_EQ(error_of(wide_round), "set_tuning: 'pieces_per_round' must be at most 64, not 65");
  // A rejected setting leaves the one in force alone.
  EXPECT_EQ(cumulus::detail::tuning().piece, Tuning{}.piece);
}

// ---- Long rows ----------------------------------------------------------------------------------

// Rows just short of long, exactly long, one round of pieces, one piece into the next round,
// whole rounds, a last piece of one element, many rounds; two long rows one after another.
TEST(LongRows, EveryDTypeAndScanMatchesTheReference) {
  const ScopedTuning tuning(small_tuning());
  Rng rng(8101);
  SCOPED_TRACE("seed 8101");
  constexpr auto kRound = static_cast<int64_t>(kSmallPiece * kSmallRound);
  const auto long_row = static_cast<int64_t>(kSmallLongRow);
  check_every_scan(rng,
                   {{{long_row - 1}, 0},
                    {{long_row}, 0},
                    {{kRound}, -1},
                    {{kRound + 1}, 0},
                    {{3 * kRound}, 0},
                    {{3 * kRound + 1}, 0},
                    {{2, 1000}, 1}},
                   kAllLayouts, std::size(kAllLayouts));
}

// Several long rows at the library's own thresholds, on 2 threads: two rows go a whole row per
// thread, three are each shared between the threads.
template <class T>
void check_several_long_rows(Scan op, Rng& rng) {
  for (const int64_t rows : {2, 3}) {
    const Shape shape = {rows, 65536 + 3};
    const std::vector<T> x = make_data<T>(op, rng, static_cast<std::size_t>(rows * (65536 + 3)));
    for (const ScanOptions o : kAllOptions) {
      const std::vector<T> got = run_scan(op, x, shape, 1, o, Layout::kSeparate);
      expect_scan_matches(scan_what(op, cumulus::dtype_of<T>, shape, 1, o, Layout::kSeparate), op,
                          x, shape, 1, o, got);
    }
  }
}

TEST(LongRows, SeveralRowsSharedOutOrEachShared) {
  ASSERT_EQ(cumulus::detail::tuning().long_row, std::size_t{65536});
  const ScopedThreads threads(2);
  Rng rng(8103);
  SCOPED_TRACE("seed 8103");
  check_several_long_rows<float>(Scan::kSum, rng);
  check_several_long_rows<float>(Scan::kProd, rng);
  check_several_long_rows<int32_t>(Scan::kSum, rng);
}

// Real-size rows at the library's own thresholds: 2, 5 and 19 pieces of 2^15 elements, the last
// over two rounds of 16; float32 in every attribute combination, the other floating types once.
TEST(LongRows, FloatCumProdAtTheDefaultThresholds) {
  ASSERT_EQ(cumulus::detail::tuning().long_row, std::size_t{65536});
  Rng rng(8102);
  SCOPED_TRACE("seed 8102");
  for (const int64_t n : {65536, 4 * 32768 + 1, 600'000}) {
    const std::vector<float> x = make_data<float>(Scan::kProd, rng, static_cast<std::size_t>(n));
    for (const ScanOptions o : kAllOptions) {
      for (const Layout layout : {Layout::kSeparate, Layout::kInPlace}) {
        const std::vector<float> got = run_scan(Scan::kProd, x, {n}, 0, o, layout);
        expect_scan_matches(scan_what(Scan::kProd, DType::kFloat32, {n}, 0, o, layout), Scan::kProd,
                            x, {n}, 0, o, got);
      }
    }
  }
  for (const DType t : {DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    cumulus::visit_dtype(t, [&]<class T>(T) {
      const Shape shape{100'003};
      const std::vector<T> x = make_data<T>(Scan::kProd, rng, 100'003);
      const ScanOptions o{.exclusive = true, .reverse = true};
      const std::vector<T> got = run_scan(Scan::kProd, x, shape, 0, o, Layout::kSeparate);
      expect_scan_matches(scan_what(Scan::kProd, t, shape, 0, o, Layout::kSeparate), Scan::kProd, x,
                          shape, 0, o, got);
    });
  }
}

// ---- Thread counts ------------------------------------------------------------------------------

// Runs `run` with 1, 2, 3 and 8 threads; all must give the 1-thread bits, which must match the
// reference.
template <class T, class Run, class Check>
void expect_same_for_every_thread_count(const std::string& what, Run run, Check check) {
  std::vector<T> first;
  {
    const ScopedThreads one(1);
    first = run();
  }
  for (const int n : {2, 3, 8}) {
    const ScopedThreads threads(n);
    const std::vector<T> got = run();
    EXPECT_TRUE(got.size() == first.size() && same_bits(got.data(), first.data(), got.size()))
        << what << ": " << n << " threads differ from 1 thread";
  }
  check(first);
}

// Long rows over several rounds, many short rows, many column tiles and Sum's row tiles, each
// cut into one task per chunk.
TEST(Rounds, SameBitsForEveryThreadCount) {
  const ScopedTuning tuning(small_tuning());
  Rng rng(8103);
  SCOPED_TRACE("seed 8103");
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{3, 1000}, 1}, {{1, 37 * 3 * 4 + 5}, -1}, {{40, 45}, 1}, {{9, 50}, 0}, {{3, 5, 29}, 1}};
  for (const DType t : cumulus::kAllDTypes) {
    cumulus::visit_dtype(t, [&]<class T>(T) {
      for (const Scan op : kBothScans) {
        for (const auto& [shape, axis] : cases) {
          const std::vector<T> x =
              make_data<T>(op, rng, static_cast<std::size_t>(ref::count_of(shape)));
          for (const ScanOptions o : {ScanOptions{}, ScanOptions{true, true}}) {
            const std::string what = scan_what(op, t, shape, axis, o, Layout::kSeparate);
            expect_same_for_every_thread_count<T>(
                what, [&] { return run_scan(op, x, shape, axis, o, Layout::kSeparate); },
                [&](const std::vector<T>& got) {
                  expect_scan_matches(what, op, x, shape, axis, o, got);
                });
          }
        }
      }
    });
  }
  for (const DType t : kFloatTypes) {
    visit_float_dtype(t, [&]<class T>(T) {
      const std::vector<Shape> shapes = {{6, 50}, {50}, {6, 1}, {}};
      std::vector<std::vector<T>> inputs;
      for (const Shape& s : shapes) {
        inputs.push_back(make_data<T>(Scan::kSum, rng, static_cast<std::size_t>(ref::count_of(s))));
      }
      const std::string what = "Sum " + std::string(cumulus::dtype_name(t)) + " [6, 50]";
      expect_same_for_every_thread_count<T>(
          what,
          [&] {
            return run_sum(inputs, shapes, {6, 50}, Layout::kSeparate);
          },
          [&](const std::vector<T>& got) {
            expect_sum_matches(what, inputs, shapes, {6, 50}, got);
          });
    });
  }
}

// ---- Column tiles -------------------------------------------------------------------------------

// Scans along an outer axis, with the inner dimension one short of a tile, a tile, one more, and
// two tiles and one: at a shrunk tile, at the default 1024, and at the kernels' own tile of 1024
// columns (impl.inc), reached when one task spans all the columns.
TEST(ColumnTiles, AroundTheTileBoundary) {
  Rng rng(8104);
  SCOPED_TRACE("seed 8104");
  Tuning one_task;
  one_task.column_tile = std::size_t{1} << 20;
  for (const Tuning& t : {small_tuning(), Tuning{}, one_task}) {
    const ScopedTuning tuning(t);
    const auto tile =
        static_cast<int64_t>(t.column_tile == one_task.column_tile ? 1024 : t.column_tile);
    SCOPED_TRACE("column tile " + std::to_string(t.column_tile) + ", boundary at " +
                 std::to_string(tile));
    std::vector<std::pair<Shape, int64_t>> cases;
    for (const int64_t inner : {tile - 1, tile, tile + 1, 2 * tile + 1}) {
      cases.push_back({{2, 3, inner}, 1});
    }
    const Layout layouts[] = {Layout::kSeparate, Layout::kInPlace};
    check_every_scan(rng, cases, layouts, std::size(layouts));
  }
}

// ---- Streamed stores ----------------------------------------------------------------------------

// Every output not written in place is streamed: rows of lengths around the vector widths, and
// columns along an outer axis a step at a time, at aligned and misaligned addresses (rows of odd
// length start at every alignment).
TEST(Streaming, ScanOutputsMatchTheReference) {
  Tuning t;
  t.stream_bytes = 0;
  t.stream_every_row = true;
  const ScopedTuning tuning(t);
  Rng rng(8105);
  SCOPED_TRACE("seed 8105");
  const Layout layouts[] = {Layout::kSeparate, Layout::kMisaligned};
  check_every_scan(rng,
                   {{{7, 45}, 1},
                    {{3, 64}, -1},
                    {{5, 17}, 1},
                    {{1, 1000}, 0},
                    {{2, 3}, 1},
                    {{9, 45}, 0},
                    {{2, 6, 37}, 1},
                    {{4, 300}, 0}},
                   layouts, std::size(layouts));
}

TEST(Streaming, SumOutputsMatchTheReference) {
  Tuning t;
  t.stream_bytes = 0;
  const ScopedTuning tuning(t);
  Rng rng(8106);
  SCOPED_TRACE("seed 8106");
  for (const DType type : kFloatTypes) {
    visit_float_dtype(type, [&]<class T>(T) {
      for (const int64_t width : {3, 8, 45, 64, 1001}) {
        const Shape out{5, width};
        const std::vector<Shape> shapes = {out, {width}, {5, 1}, {}, out};
        std::vector<std::vector<T>> inputs;
        for (const Shape& s : shapes) {
          inputs.push_back(
              make_data<T>(Scan::kSum, rng, static_cast<std::size_t>(ref::count_of(s))));
        }
        for (const Layout layout : kAllLayouts) {
          const std::vector<T> got = run_sum(inputs, shapes, out, layout);
          expect_sum_matches("Sum " + std::string(cumulus::dtype_name(type)) + " " +
                                 shape_str(out) + " " + layout_name(layout),
                             inputs, shapes, out, got);
        }
      }
    });
  }
}

// ---- Sum's row tiles ----------------------------------------------------------------------------

// Rows one short of a tile, a tile, one more and two tiles and one, with broadcast operands that
// must be read from the tile's first column: at a shrunk tile (streamed and not) and the default.
TEST(SumTiles, AroundTheRowTile) {
  Rng rng(8107);
  SCOPED_TRACE("seed 8107");
  Tuning shrunk = small_tuning();
  Tuning shrunk_cached = shrunk;
  shrunk_cached.stream_bytes = Tuning{}.stream_bytes;
  for (const Tuning& t : {shrunk, shrunk_cached, Tuning{}}) {
    const ScopedTuning tuning(t);
    const auto tile = static_cast<int64_t>(t.sum_row_tile);
    SCOPED_TRACE("row tile " + std::to_string(tile));
    for (const DType type : kFloatTypes) {
      visit_float_dtype(type, [&]<class T>(T) {
        for (const int64_t width : {tile - 1, tile, tile + 1, 2 * tile + 1}) {
          const Shape out{2, width};
          const std::vector<Shape> shapes = {out, {width}, {2, 1}, {1, width}};
          std::vector<std::vector<T>> inputs;
          for (const Shape& s : shapes) {
            inputs.push_back(
                make_data<T>(Scan::kSum, rng, static_cast<std::size_t>(ref::count_of(s))));
          }
          const std::vector<T> got = run_sum(inputs, shapes, out, Layout::kSeparate);
          expect_sum_matches("Sum " + std::string(cumulus::dtype_name(type)) + " " + shape_str(out),
                             inputs, shapes, out, got);
        }
      });
    }
  }
}

// The entry without checks, for inputs of the output's shape: one to four of them, around the row
// tile, in place and misaligned, at shrunk thresholds (every task its own chunk, on three
// threads) and the defaults.
TEST(SumSameShape, MatchesTheReference) {
  Rng rng(8108);
  SCOPED_TRACE("seed 8108");
  const ScopedThreads threads(3);
  for (const Tuning& t : {small_tuning(), Tuning{}}) {
    const ScopedTuning tuning(t);
    for (const DType type : kFloatTypes) {
      visit_float_dtype(type, [&]<class T>(T) {
        for (const Shape& out : std::vector<Shape>{{}, {0, 3}, {10}, {2, 11}, {3, 12}, {1001}}) {
          for (std::size_t count = 1; count <= 4; ++count) {
            const std::vector<Shape> shapes(count, out);
            std::vector<std::vector<T>> inputs;
            for (const Shape& s : shapes) {
              inputs.push_back(
                  make_data<T>(Scan::kSum, rng, static_cast<std::size_t>(ref::count_of(s))));
            }
            for (const Layout layout : kAllLayouts) {
              const std::vector<T> got = run_sum(inputs, shapes, out, layout, SumEntry::kSameShape);
              expect_sum_matches("Sum " + std::string(cumulus::dtype_name(type)) + " " +
                                     std::to_string(count) + " x " + shape_str(out) + " " +
                                     layout_name(layout),
                                 inputs, shapes, out, got);
            }
          }
        }
      });
    }
  }
}

}  // namespace
