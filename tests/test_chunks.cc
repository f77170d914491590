// Chunked scans (include/cumulus/chunks.h): for random cuts of the axis (empty and one-element
// chunks included), in order and as a tree of combines, the chunks' outputs put together equal the
// one-pass scan bit for bit (CumSum of every type, CumProd of integers; floating CumProd within its
// promise); states survive their byte form, and bytes that are truncated or altered are refused.
// CTest reruns this binary under each CUMULUS_ISA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "cumulus/chunks.h"
#include "cumulus/ops.h"
#include "error_of.h"
#include "scoped.h"

namespace {

using cumulus::ConstTensorView;
using cumulus::DType;
using cumulus::OpKind;
using cumulus::ScanOptions;
using cumulus::ScanState;
using cumulus::Shape;
using cumulus::Tensor;
using cumulus::TensorView;
using cumulus::testing::ScopedTuning;
using Rng = std::mt19937_64;

// Values that make floating scans hard: cancellation across scales, ties far below the last
// place, zeros of both signs; small integers for integer types.
Tensor make_input(DType dtype, const Shape& shape, Rng& rng) {
  Tensor t(dtype, shape);
  const auto n = static_cast<std::size_t>(cumulus::element_count(shape));
  cumulus::visit_dtype(dtype, [&]<class T>(T) {
    T* p = t.data<T>();
    for (std::size_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<T>) {
        p[i] = static_cast<T>(static_cast<int64_t>(rng() % 7) - 3);
      } else {
        const double scales[] = {1.0, 0x1p-30, 0x1p20, 0x1p-60};
        double v = std::ldexp(static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000), -8) *
                   scales[rng() % 4];
        if (rng() % 16 == 0) v = rng() % 2 ? -0.0 : 0.0;
        p[i] = cumulus::from_double<T>(v);
      }
    }
  });
  return t;
}

// A cut of `length` into chunks of at most `most`, with empty and one-element chunks among them.
std::vector<int64_t> cut(int64_t length, Rng& rng, int64_t most = 9) {
  std::vector<int64_t> sizes;
  int64_t left = length;
  while (left > 0) {
    const int64_t kind = static_cast<int64_t>(rng() % 4);
    const int64_t n = kind == 0   ? 0
                      : kind == 1 ? 1
                                  : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(most));
    sizes.push_back(std::min(n, left));
    left -= sizes.back();
  }
  if (rng() % 2)
    sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(rng() % (sizes.size() + 1)), 0);
  return sizes;
}

// The elements [from, from + n) of x along `axis`, as a dense tensor.
Tensor slice(const Tensor& x, std::size_t axis, int64_t from, int64_t n) {
  Shape shape = x.shape();
  std::size_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= static_cast<std::size_t>(shape[d]);
  for (std::size_t d = axis + 1; d < shape.size(); ++d) inner *= static_cast<std::size_t>(shape[d]);
  const auto length = static_cast<std::size_t>(shape[axis]);
  shape[axis] = n;
  Tensor out(x.dtype(), shape);
  const std::size_t item = cumulus::dtype_size(x.dtype());
  const auto* src = static_cast<const std::byte*>(x.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  for (std::size_t o = 0; o < outer; ++o) {
    std::memcpy(dst + o * static_cast<std::size_t>(n) * inner * item,
                src + (o * length + static_cast<std::size_t>(from)) * inner * item,
                static_cast<std::size_t>(n) * inner * item);
  }
  return out;
}

// Writes `part` back into `whole` at [from, from + n) along the axis.
void place(Tensor& whole, std::size_t axis, int64_t from, const Tensor& part) {
  const Shape& shape = whole.shape();
  std::size_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= static_cast<std::size_t>(shape[d]);
  for (std::size_t d = axis + 1; d < shape.size(); ++d) inner *= static_cast<std::size_t>(shape[d]);
  const auto length = static_cast<std::size_t>(shape[axis]);
  const auto n = static_cast<std::size_t>(part.shape()[axis]);
  const std::size_t item = cumulus::dtype_size(whole.dtype());
  for (std::size_t o = 0; o < outer; ++o) {
    std::memcpy(static_cast<std::byte*>(whole.raw()) +
                    (o * length + static_cast<std::size_t>(from)) * inner * item,
                static_cast<const std::byte*>(part.raw()) + o * n * inner * item, n * inner * item);
  }
}

Shape lines_shape(const Shape& shape, std::size_t axis) {
  Shape lines = shape;
  lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(axis));
  return lines;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Chunk offsets in scan order: forward, or from the end for a reverse scan.
std::vector<std::pair<int64_t, int64_t>> in_scan_order(const std::vector<int64_t>& sizes,
                                                       int64_t length, bool reverse) {
  std::vector<std::pair<int64_t, int64_t>> chunks;
  int64_t at = 0;
  for (int64_t n : sizes) {
    chunks.emplace_back(reverse ? length - at - n : at, n);
    at += n;
  }
  return chunks;
}

Tensor one_pass(OpKind op, const Tensor& x, int64_t axis, ScanOptions options) {
  return op == OpKind::kCumSum ? cumulus::cumsum(x.view(), axis, options)
                               : cumulus::cumprod(x.view(), axis, options);
}

Tensor chunked_in_order(OpKind op, const Tensor& x, std::size_t axis, ScanOptions options,
                        const std::vector<int64_t>& sizes, bool through_bytes) {
  Tensor y(x.dtype(), x.shape());
  ScanState state(op, x.dtype(), lines_shape(x.shape(), axis));
  for (auto [from, n] : in_scan_order(sizes, x.shape()[axis], options.reverse)) {
    const Tensor part = slice(x, axis, from, n);
    Tensor out(x.dtype(), part.shape());
    cumulus::scan_chunk(op, part.view(), static_cast<int64_t>(axis), out.view(), options, state);
    place(y, axis, from, out);
    if (through_bytes) state = ScanState::from_bytes(state.to_bytes());
  }
  return y;
}

// Totals, carries as a tree (pairs combined level by level), then every chunk from its carry.
Tensor chunked_as_tree(OpKind op, const Tensor& x, std::size_t axis, ScanOptions options,
                       const std::vector<int64_t>& sizes) {
  const auto chunks = in_scan_order(sizes, x.shape()[axis], options.reverse);
  std::vector<ScanState> totals;
  for (auto [from, n] : chunks) {
    totals.push_back(
        cumulus::chunk_total(op, slice(x, axis, from, n).view(), static_cast<int64_t>(axis)));
  }
  // carry[k] = totals[0] + ... + totals[k-1], formed from a tree of partial combines.
  std::vector<std::vector<ScanState>> levels{totals};
  while (levels.back().size() > 1) {
    std::vector<ScanState> next;
    const auto& level = levels.back();
    for (std::size_t i = 0; i + 1 < level.size(); i += 2) {
      ScanState s = level[i];
      s.combine(level[i + 1]);
      next.push_back(std::move(s));
    }
    if (level.size() % 2) next.push_back(level.back());
    levels.push_back(std::move(next));
  }
  Tensor y(x.dtype(), x.shape());
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    ScanState carry(op, x.dtype(), lines_shape(x.shape(), axis));
    // The nodes covering [0, k): one per set bit of k, highest level first.
    std::size_t start = 0;
    for (std::size_t l = levels.size(); l-- > 0;) {
      const std::size_t width = std::size_t{1} << l;
      if (start + width <= k) {
        carry.combine(levels[l][start / width]);
        start += width;
      }
    }
    const auto [from, n] = chunks[k];
    const Tensor part = slice(x, axis, from, n);
    Tensor out(x.dtype(), part.shape());
    cumulus::scan_chunk(op, part.view(), static_cast<int64_t>(axis), out.view(), options, carry);
    place(y, axis, from, out);
  }
  return y;
}

// Within one ulp (floating CumProd's promise allows the chunking to move the last bit): the bit
// patterns of two finite values of one sign, read as integers, differ by at most one.
bool within_one_ulp(const Tensor& a, const Tensor& b) {
  bool ok = true;
  const auto n = static_cast<std::size_t>(cumulus::element_count(a.shape()));
  const std::size_t item = cumulus::dtype_size(a.dtype());
  const auto ordered = [&](const Tensor& t, std::size_t i) {
    uint64_t bits = 0;
    std::memcpy(&bits, static_cast<const std::byte*>(t.raw()) + i * item, item);
    const uint64_t sign = uint64_t{1} << (8 * item - 1);
    return (bits & sign) != 0 ? -static_cast<int64_t>(bits & ~sign) : static_cast<int64_t>(bits);
  };
  cumulus::visit_dtype(a.dtype(), [&]<class T>(T) {
    for (std::size_t i = 0; i < n && ok; ++i) {
      const double u = cumulus::to_double(a.data<T>()[i]), v = cumulus::to_double(b.data<T>()[i]);
      if ((std::isnan(u) && std::isnan(v)) || u == v) continue;
      const int64_t d = ordered(a, i) - ordered(b, i);
      ok = d >= -1 && d <= 1;
    }
  });
  return ok;
}

class ChunkedScans : public ::testing::TestWithParam<DType> {};

TEST_P(ChunkedScans, EqualOnePassForAnyCut) {
  const DType dtype = GetParam();
  Rng rng(static_cast<uint64_t>(dtype) * 97 + 1);
  // Lines far apart (2 x 350 along axis 0) take several groups of lines, the last one partial,
  // for every element size. Under the small tuning the 1-D lines are long rows, scanned in pieces
  // from the chunk's carry, and the lines' groups are shared among the threads.
  const Shape shapes[] = {{200}, {3, 23, 5}, {2, 4, 31}, {17, 2, 3}, {2, 5, 70}};
  cumulus::detail::Tuning small;
  small.long_row = 24;
  small.piece = 8;
  small.min_chunk_elements = 16;
  int cases = 0;
  for (const bool tuned : {false, true}) {
    std::optional<ScopedTuning> scoped;
    if (tuned) scoped.emplace(small);
    for (const Shape& shape : shapes) {
      for (std::size_t axis = 0; axis < shape.size(); ++axis) {
        for (int attrs = 0; attrs < 4; ++attrs) {
          for (OpKind op : {OpKind::kCumSum, OpKind::kCumProd}) {
            const ScanOptions options{(attrs & 1) != 0, (attrs & 2) != 0};
            const Tensor x = make_input(dtype, shape, rng);
            const Tensor want = one_pass(op, x, static_cast<int64_t>(axis), options);
            const auto sizes = cut(shape[axis], rng, tuned ? 60 : 9);
            const Tensor in_order = chunked_in_order(op, x, axis, options, sizes, attrs == 3);
            const Tensor tree = chunked_as_tree(op, x, axis, options, sizes);
            const bool exact = op == OpKind::kCumSum || !cumulus::is_floating(dtype);
            const auto what = ::testing::Message()
                              << cumulus::op_name(op) << " shape " << cumulus::shape_string(shape)
                              << " axis " << axis << " exclusive " << options.exclusive
                              << " reverse " << options.reverse << " chunks " << sizes.size()
                              << " small tuning " << tuned;
            if (exact) {
              EXPECT_TRUE(same_bits(in_order, want)) << what;
              EXPECT_TRUE(same_bits(tree, want)) << what << " (tree)";
            } else {
              EXPECT_TRUE(within_one_ulp(in_order, want)) << what;
              EXPECT_TRUE(within_one_ulp(tree, want)) << what << " (tree)";
            }
            ++cases;
            if (HasFailure()) return;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 2 * 4 * 2 * (1 + 3 + 3 + 3 + 3));
}

// Columns (lines far apart) continue from carries that test the column kernels' ways in: a carry
// that needs a pair's low part, one no pair can hold (three scales apart), zeros of either sign
// only, infinities, NaN, a prefix past the type's range and back. Cut in two at every row, in
// every direction; the same bits as the one-pass scan. 264 columns: two of the kernels' tiles.
TEST(ChunkedColumns, CarriesAtTheirEdges) {
  for (const DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    const double big = dtype == DType::kFloat16 ? 0x1p15 : 0x1p100;
    const double max = dtype == DType::kFloat64   ? std::numeric_limits<double>::max()
                       : dtype == DType::kFloat16 ? 65504.0
                       : dtype == DType::kBFloat16
                           ? 0x1.fep127
                           : static_cast<double>(std::numeric_limits<float>::max());
    const double tiny = dtype == DType::kFloat16 ? 0x1p-24 : 0x1p-120;
    const double inf = std::numeric_limits<double>::infinity();
    const std::vector<std::vector<double>> columns = {
        {big, 1, -big, 2, 3, 0.5, -1},      {big, 1, tiny, -big, -1, 2, 0.25},
        {-0.0, -0.0, -0.0, 1, -1, -0.0, 1}, {-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0},
        {inf, 1, 2, -inf, 3, 4, 5},         {1, std::nan(""), 2, 3, 4, 5, 6},
        {max, max, -max, -max, 1, 1, 0.5},  {0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0}};
    const std::size_t width = 264, length = columns[0].size();
    Tensor x(dtype, {static_cast<int64_t>(length), static_cast<int64_t>(width)});
    cumulus::visit_dtype(dtype, [&]<class T>(T) {
      for (std::size_t i = 0; i < length; ++i) {
        for (std::size_t j = 0; j < width; ++j) {
          x.data<T>()[i * width + j] = cumulus::from_double<T>(columns[j % columns.size()][i]);
        }
      }
    });
    for (int attrs = 0; attrs < 4; ++attrs) {
      const ScanOptions options{(attrs & 1) != 0, (attrs & 2) != 0};
      const Tensor want = one_pass(OpKind::kCumSum, x, 0, options);
      for (int64_t k = 0; k <= static_cast<int64_t>(length); ++k) {
        const Tensor got = chunked_in_order(OpKind::kCumSum, x, 0, options,
                                            {k, static_cast<int64_t>(length) - k}, false);
        EXPECT_TRUE(same_bits(got, want))
            << cumulus::dtype_name(dtype) << " exclusive " << options.exclusive << " reverse "
            << options.reverse << " cut after " << k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ChunkedScans, ::testing::ValuesIn(cumulus::kAllDTypes),
                         [](const auto& info) {
                           return std::string(cumulus::dtype_name(info.param));
                         });

ScanState some_state(DType dtype) {
  Rng rng(3);
  const Tensor x = make_input(dtype, {6, 3}, rng);
  return cumulus::chunk_total(OpKind::kCumSum, x.view(), 0);
}

TEST(ScanStateBytes, RoundTripAndRefuseTruncatedOrAltered) {
  for (DType dtype : cumulus::kAllDTypes) {
    const ScanState state = some_state(dtype);
    const auto bytes = state.to_bytes();
    const ScanState back = ScanState::from_bytes(bytes);
    EXPECT_EQ(back.to_bytes(), bytes);
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_EQ(back.lines_shape(), Shape{3});
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      const std::span<const std::byte> cut_bytes(bytes.data(), n);
      cumulus::error_of([&] { ScanState::from_bytes(cut_bytes); });
    }
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      auto altered = bytes;
      altered[i] ^= std::byte{0x10};
      cumulus::error_of([&] { ScanState::from_bytes(altered); });
    }
    if (HasFailure()) return;
  }
}

TEST(ScanStateBytes, MessagesNameTheProblem) {
  const auto bytes = some_state(DType::kFloat32).to_bytes();
  auto altered = bytes;
  altered[12] ^= std::byte{1};
  EXPECT_EQ(cumulus::error_of([&] { ScanState::from_bytes(altered); }),
            "ScanState: the checksum does not match the " + std::to_string(bytes.size()) +
                " bytes: they were truncated or altered");
  const std::vector<std::byte> junk(40, std::byte{7});
  EXPECT_EQ(cumulus::error_of([&] { ScanState::from_bytes(junk); }),
            "ScanState: the bytes do not start with a cumulus scan state's mark");
}

TEST(ScanStateErrors, MismatchesAreNamed) {
  Rng rng(1);
  const Tensor x = make_input(DType::kFloat32, {4, 3}, rng);
  Tensor y(DType::kFloat32, {4, 3});
  ScanState wrong_lines(OpKind::kCumSum, DType::kFloat32, {4});
  EXPECT_EQ(cumulus::error_of([&] {
              cumulus::scan_chunk(OpKind::kCumSum, x.view(), 0, y.view(), {}, wrong_lines);
            }),
            "CumSum: the scan state has lines of shape [4] but input 'x' has [3] along the axis");
  ScanState wrong_type(OpKind::kCumSum, DType::kFloat64, {3});
  EXPECT_EQ(cumulus::error_of([&] {
              cumulus::scan_chunk(OpKind::kCumSum, x.view(), 0, y.view(), {}, wrong_type);
            }),
            "CumSum: the scan state is for type float64 but input 'x' has type float32");
  ScanState product(OpKind::kCumProd, DType::kFloat32, {3});
  EXPECT_EQ(cumulus::error_of(
                [&] { cumulus::scan_chunk(OpKind::kCumSum, x.view(), 0, y.view(), {}, product); }),
            "CumSum: the scan state is for CumProd, not CumSum");
  ScanState sum_state(OpKind::kCumSum, DType::kFloat32, {3});
  EXPECT_EQ(cumulus::error_of([&] { sum_state.combine(product); }),
            "ScanState.combine: the scan state is for CumProd, not CumSum");
  EXPECT_EQ(cumulus::error_of([&] { ScanState(OpKind::kSum, DType::kFloat32, {3}); }),
            "ScanState: op must be CumSum or CumProd, not Sum");
  EXPECT_EQ(
      cumulus::error_of(
          [&] { cumulus::scan_chunk(OpKind::kCumSum, x.view(), 2, y.view(), {}, sum_state); }),
      "CumSum: axis 2 is out of range for input 'x' of rank 2 (shape [4, 3]); valid: [-2, 1]");
}

}  // namespace
