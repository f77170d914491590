// Checks shared by the operators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cumulus/ops.h"

namespace cumulus::detail {

// Byte size of a view whose shape has already passed element_count.
inline std::size_t byte_size(ConstTensorView v, int64_t count) {
  return static_cast<std::size_t>(count) * dtype_size(v.dtype);
}

// Throws unless `out` and `in` are the same buffer or do not overlap at all.
void check_no_partial_overlap(std::string_view op, std::string_view out_name, const void* out,
                              std::size_t out_bytes, std::string_view in_name, const void* in,
                              std::size_t in_bytes);

// Throws when a non-empty view has no data.
void check_data(std::string_view op, std::string_view name, const void* data, int64_t count);

// A scan's tensor seen as `outer` slabs of `length` x `inner` elements along its axis.
struct ScanLayout {
  std::size_t outer = 1, length = 0, inner = 1;
  int64_t count = 0;  // elements
  std::size_t bytes = 0;
};
// The checks of a CumSum/CumProd call (rank, axis, y's type and shape, data, overlap), worded
// once for the one-pass and the chunked scans; returns the layout along the axis.
ScanLayout check_scan(OpKind op, ConstTensorView x, int64_t axis, TensorView y);

// The type rules the ops check on tensors and the ONNX front end on declared types, worded once.
// `where` ends the message: the front end names the tensor and the node, the ops nothing.
[[noreturn]] void fail_axis_type(std::string_view op, std::string_view type,
                                 std::string_view where = {});
[[noreturn]] void fail_sum_type_mismatch(std::string_view op, std::size_t k, std::string_view type,
                                         std::string_view first_type, std::string_view where = {});

}  // namespace cumulus::detail
