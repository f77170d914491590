// One long contiguous line of a scan, shared by the threads: the one-pass scan's way with long
// rows, which the chunked scan takes too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "cumulus/ops.h"
#include "kernels/kernels.h"

namespace cumulus::detail {

// Scans `length` contiguous elements from `start` (everything before them in scan order; null:
// nothing), shared by the pool's threads (scan_op.cc), and returns the carry after them where
// `carry_after` (else nothing: it can cost another read). y may be x.
std::optional<Carry> scan_long_line(OpKind op, DType dtype, const std::byte* x, std::byte* y,
                                    std::size_t length, ScanOptions options, const Carry* start,
                                    bool carry_after);

}  // namespace cumulus::detail
