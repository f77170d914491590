// Kernels: raw loops over pointers and counts. No allocation, no threads, no validation beyond
// what the ops layer has already done. One table of them per instruction set, chosen once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cumulus/dtype.h"
#include "kernels/exact.h"

namespace cumulus::detail {

// A floating CumProd's product (prod.inc): (hi + lo) * 2^exp with |hi + lo| in [1, 2) (lo is 0
// but for float64) when q == 1; otherwise q, which is 0, Inf or NaN, with hi's sign.
struct ProductCarry {
  double hi = 1, lo = 0, q = 1;
  int64_t exp = 0;
};

// The accumulator a scan carries between pieces of one row: the exact sum for a floating CumSum,
// `prod` for a floating CumProd, the unsigned integer of the element's width (wrapping) for
// integers.
struct Carry {
  uint64_t u = 0;
  ExactSum sum;
  ProductCarry prod;
};

// Scans `outer` slabs of `length` x `inner` elements, laid out contiguously, along the length
// axis, for the columns [col_begin, col_end) of each slab. y may equal x. Where the kernels take
// carries (ScanKernels::block_carries), a column (slab o, column c) continues from
// carry_in[o * inner + c], everything before it in scan order (at least one term), and its state
// after the block goes to carry_out[o * inner + c]; either may be null, and they may be one array.
struct ScanBlock {
  const void* x;
  void* y;
  std::size_t outer, length, inner, col_begin, col_end;
  bool exclusive, reverse;
  const Carry* carry_in = nullptr;
  Carry* carry_out = nullptr;
  bool stream = false;  // the output is too large to stay in cache: bypass it where a kernel can
};
using ScanKernel = void (*)(const ScanBlock& block) noexcept;

// Scans `rows` contiguous rows of `length` elements. With a carry (rows == 1), the row is one
// piece of a longer one and the carry is everything before it in scan order; without, the row
// starts fresh: an inclusive scan copies its first element, an exclusive one writes the identity.
struct RowScan {
  const void* x;
  void* y;
  std::size_t rows, length;
  bool exclusive, reverse;
  const Carry* carry;  // null: start fresh
  bool stream;         // the output is too large to stay in cache: bypass it
};
using RowScanKernel = void (*)(const RowScan& scan) noexcept;

// The sum (or product) of n contiguous elements, accumulated as the scans do.
using TotalKernel = Carry (*)(const void* x, std::size_t n) noexcept;
// a + b (or a * b) in the accumulator type of `dtype`, in scan order.
using CombineKernel = Carry (*)(Carry a, Carry b) noexcept;

// y[j] = in[0][j * step[0]] + in[1][j * step[1]] + ... for j < count, the exact sum rounded once
// (sum.inc); each step is 0 (a broadcast operand) or 1. y may equal an input with step 1.
struct SumRow {
  const void* const* inputs;
  const unsigned char* steps;
  std::size_t num_inputs;
  void* y;
  std::size_t count;
  bool stream;  // the output is too large to stay in cache: bypass it
};
using SumKernel = void (*)(const SumRow& row) noexcept;

// A piece of a long row whose carry another thread provides (a floating CumProd's: at most
// kMaxSpansPerPiece spans, cut as one pass cuts the row, from its end when `reverse`; a float64
// CumSum's: at most kMaxF64ChainedPiece elements): the kernel forms the piece's totals (its scan's
// own first pass), hands them to `handoff` in scan order, which returns the carry before the piece
// once it is known (false: nothing before) and publishes the carry after it, then scans the piece
// from that carry. So a piece is read once from memory for its totals and its scan.
struct ChainedScan {
  const void* x;  // the piece's first element in memory
  void* y;
  std::size_t length;
  bool exclusive;
  bool reverse;
  bool stream;
  bool (*handoff)(void* context, const Carry* totals, std::size_t count, Carry* before);
  void* context;
};
using ChainedScanKernel = void (*)(const ChainedScan& scan) noexcept;

struct ScanKernels {
  ScanKernel block;
  RowScanKernel rows;
  TotalKernel total;
  CombineKernel combine;
  bool block_carries = false;           // whether `block` takes ScanBlock's carries
  ChainedScanKernel chained = nullptr;  // floating CumProd, float64 CumSum (vector tables)
  // Whether `rows` (and `chained`) write a large output past the cache (RowScan::stream) or with
  // ordinary stores: see Tuning::stream_bytes.
  bool stream_rows = true;
};

struct KernelTable {
  const char* isa;
  ScanKernels cumsum[kNumDTypes];
  ScanKernels cumprod[kNumDTypes];
  SumKernel sum[kNumDTypes];  // floating types only; others null
};

// The table for the best instruction set this CPU has, capped by the environment variable
// CUMULUS_ISA (scalar, avx2, avx512, avx512fp16). Chosen once per process; any other CUMULUS_ISA
// throws (kInvalidArgument) from every call.
const KernelTable& kernels();

const KernelTable& scalar_kernels() noexcept;
const KernelTable& avx2_kernels() noexcept;
const KernelTable& avx512_kernels() noexcept;
const KernelTable& avx512fp16_kernels() noexcept;

}  // namespace cumulus::detail
