// The size thresholds that choose the operators' paths, in one place, and the kernel table they
// call. The defaults are the library's. Tests and fuzz targets replace them (set_tuning) so that
// small inputs take every path: long rows cut into pieces over several rounds, column tiles,
// streamed stores, parallel chunks, other instruction sets. An internal header, reached through
// the src/ include path; not part of the public API.
#pragma once

#include <cstddef>

#include "kernels/kernels.h"
#include "kernels/tiles.h"

namespace cumulus::detail {

// The most pieces of a long row in one round: a round's totals and carries live on the stack.
inline constexpr std::size_t kMaxPiecesPerRound = 64;

struct Tuning {
  // A contiguous row at least `long_row` elements long is cut into pieces of `piece` elements,
  // so the threads share one long scan. The pieces go `pieces_per_round` at a time: a round's
  // input is still in cache when its pieces are scanned, so the row is read from memory once.
  std::size_t long_row = std::size_t{1} << 16;
  std::size_t piece = std::size_t{1} << 15;
  std::size_t pieces_per_round = 16;
  // Columns per task of a scan along an outer axis: by default one kernel tile.
  std::size_t column_tile = kScanColumnTile;
  // Elements per task of a Sum along its innermost dimension.
  std::size_t sum_row_tile = std::size_t{1} << 15;
  // The elements a chunk of work should hold to be worth a thread hand-off.
  std::size_t min_chunk_elements = std::size_t{1} << 15;
  // Outputs of at least this many bytes are written with non-temporal stores: they cannot stay in
  // the cache, and bypassing it saves reading each line before writing it. Rows go so only where
  // their kernels' ScanKernels::stream_rows says it pays (float16, bfloat16 and float32 CumSum
  // rows keep ordinary stores: their exact arithmetic runs under the memory traffic only then;
  // table.inc), or where `stream_every_row` asks (tests, to reach every kernel's streaming stores).
  std::size_t stream_bytes = std::size_t{32} << 20;
  bool stream_every_row = false;
  // The kernels the operators call; null means kernels(), the table chosen for this process.
  const KernelTable* table = nullptr;

  const KernelTable& kernel_table() const { return table != nullptr ? *table : kernels(); }
};

// Whether rows of `kernel` write an output of `bytes` past the cache (never in place).
inline bool stream_rows(const Tuning& t, const ScanKernels& kernel, std::size_t bytes,
                        bool in_place) {
  return !in_place && bytes >= t.stream_bytes && (kernel.stream_rows || t.stream_every_row);
}

// The values in force. An operator copies them once per call, so a call takes one set of paths.
const Tuning& tuning() noexcept;

// For tests and fuzz targets only: replaces the values in force (Tuning{} restores the
// defaults); not while an operator runs. A zero piece, round, tile or chunk, or more than
// kMaxPiecesPerRound pieces per round, is an error (ErrorCode::kInvalidArgument).
void set_tuning(const Tuning& values);

}  // namespace cumulus::detail
