// cumulus scan: CumSum or CumProd of a .npy file larger than memory, streamed in bounded memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cumulus/ops.h"

namespace cumulus::cli {

struct ScanRequest {
  std::string input, output;
  OpKind op = OpKind::kCumSum;
  int64_t axis = 0;
  ScanOptions options;
  std::size_t memory = 0;  // bytes for the buffers and the scan state
  bool sync = true;        // the output reaches the disk before it takes its name
};

// "4096", "64K", "256M", "2G": bytes, with an optional power-of-1024 suffix (K, M, G or T), as
// CUMULUS_MEMORY_LIMIT reads them. Empty when the text is not such a size.
std::optional<std::size_t> parse_memory_size(std::string_view text);

// Scans request.input into request.output (written atomically); prints "wrote ..." on stdout.
int scan_command(const ScanRequest& request);

}  // namespace cumulus::cli
