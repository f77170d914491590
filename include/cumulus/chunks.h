// cumulus: scans cut into chunks along their axis, for data that arrives a piece at a time (a file
// larger than memory, a stream) or lives on several machines (Dask).
//
// A ScanState holds, for every line of a scan (every position of the axes other than the scanned
// one), everything before a point of the axis, in the kernels' own exact form: an exact sum for
// floating CumSum, the wrapping accumulator for integers, the product state for floating CumProd.
// Two ways to use it, with the same results:
//  - in order: a state starts empty; scan_chunk scans each chunk (in scan order: from the end for
//    a reverse scan) from the state and adds the chunk to it;
//  - as a tree: chunk_total gives each chunk's own state; combine is associative, so an engine can
//    form every chunk's carry (the combine of the totals of the chunks before it) in any grouping,
//    then scan each chunk from its carry with scan_chunk, independently.
// For any cut of the axis into chunks (empty ones included), the chunks' outputs put together are,
// bit for bit, those of the one-pass cumsum (every type) and cumprod (integers); a floating
// cumprod keeps its one-pass promise (within 1 ulp of the exact product).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cumulus/dtype.h"
#include "cumulus/ops.h"
#include "cumulus/tensor.h"

namespace cumulus {

class ScanState {
 public:
  // The empty state (nothing before) of `op` (kCumSum or kCumProd) over `dtype`, for tensors
  // whose shape without the scanned axis is `lines_shape`.
  ScanState(OpKind op, DType dtype, Shape lines_shape);
  ScanState(const ScanState& other);
  ScanState(ScanState&& other) noexcept;
  ScanState& operator=(const ScanState& other);
  ScanState& operator=(ScanState&& other) noexcept;
  ~ScanState();

  OpKind op() const noexcept;
  DType dtype() const noexcept;
  const Shape& lines_shape() const noexcept;

  // Appends `later`, the state of the elements that follow this one's in scan order: afterwards
  // this holds both. Associative. The two must be of one op, dtype and lines shape.
  void combine(const ScanState& later);

  // A self-describing byte form (op, dtype, lines shape, every line's accumulator) and back.
  // from_bytes validates what it reads: bytes that are truncated, altered or from another format
  // are an error (kInvalidArgument) naming what is wrong, never a state with made-up contents.
  std::vector<std::byte> to_bytes() const;
  static ScanState from_bytes(std::span<const std::byte> bytes);

  struct Impl;

 private:
  friend void scan_chunk(OpKind, ConstTensorView, int64_t, TensorView, ScanOptions, ScanState&);
  friend ScanState chunk_total(OpKind, ConstTensorView, int64_t);
  std::unique_ptr<Impl> impl_;
};

// Scans the chunk x along `axis` into y as the one-pass scan of the whole tensor would for those
// positions, given that `state` holds everything before the chunk in scan order (for a reverse
// scan: everything after it), then adds the chunk to `state`. x and y: the whole tensor's shape
// but for the axis, of any length (0 too); y as in cumsum (x's dtype and shape; may be x).
void scan_chunk(OpKind op, ConstTensorView x, int64_t axis, TensorView y, ScanOptions options,
                ScanState& state);

// The state of the chunk's own elements along `axis`: what scan_chunk would add to a state.
ScanState chunk_total(OpKind op, ConstTensorView x, int64_t axis);

// The scratch memory scan_chunk and chunk_total take on each thread of the pool for a chunk of
// `dtype` `length` long along its axis, whose lines lie `inner` elements apart (the product of the
// dimensions after the axis): groups of such lines are gathered to be scanned; none when inner is
// 1. Linear in length.
std::size_t scan_chunk_scratch_bytes(DType dtype, int64_t length, int64_t inner);

}  // namespace cumulus
