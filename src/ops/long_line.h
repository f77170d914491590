// One long contiguous line of a scan, shared by the threads: the one-pass scan's way with long
// rows, which the chunked scan takes too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "cumulus/ops.h"
#include "kernels/kernels.h"

namespace cumulus::detail {

// Scans `length` contiguous elements from `start` (everything before them in scan order; null:
// nothing), shared by the pool's threads (scan_op.cc), and returns the carry after them where
// `carry_after` (else nothing: it can cost another read). y may be x.
std::optional<Carry> scan_long_line(OpKind op, DType dtype, const std::byte* x, std::byte* y,
                                    std::size_t length, ScanOptions options, const Carry* start,
                                    bool carry_after);

// Where a long row of `length` elements is cut into a segment per thread, `width` of them, when
// one thread totals the segment another scans (scan_long_line's split): segment t is [cut[t],
// cut[t + 1]), each shorter than the one before by a total's cost over its scan's, `total_share`,
// so the threads finish together (proportions 1, 1 - share, 1 - share (1 - share), ...); cuts at
// multiples of `align`. Returns the width + 1 cuts.
std::vector<std::size_t> split_cuts(std::size_t length, std::size_t width, double total_share,
                                    std::size_t align);

}  // namespace cumulus::detail
