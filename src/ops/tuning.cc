#include "ops/tuning.h"

#include <string_view>
#include <utility>

#include "core/fail.h"

namespace cumulus::detail {
namespace {

constinit Tuning g_tuning{};

}  // namespace

const Tuning& tuning() noexcept { return g_tuning; }

void set_tuning(const Tuning& values) {
  const std::pair<std::string_view, std::size_t> positive[] = {
      {"piece", values.piece},
      {"pieces_per_round", values.pieces_per_round},
      {"column_tile", values.column_tile},
      {"sum_row_tile", values.sum_row_tile},
      {"min_chunk_elements", values.min_chunk_elements}};
  for (const auto& [name, value] : positive) {
    if (value == 0)
      fail(ErrorCode::kInvalidArgument, "set_tuning: '{}' must be at least 1, not 0", name);
  }
  if (values.pieces_per_round > kMaxPiecesPerRound) {
    fail(ErrorCode::kInvalidArgument, "set_tuning: 'pieces_per_round' must be at most {}, not {}",
         kMaxPiecesPerRound, values.pieces_per_round);
  }
  g_tuning = values;
}

}  // namespace cumulus::detail
