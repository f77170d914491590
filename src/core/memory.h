// Tensor memory. Large blocks sit on transparent huge pages and are kept for reuse after they are
// freed, as an inference runtime's arena does: faulting in fresh pages costs more than the
// kernels themselves on large tensors.
#pragma once

#include <cstddef>

namespace cumulus::detail {

struct Block {
  std::byte* data;
  std::size_t capacity;  // bytes really held, >= the bytes asked for
};

// 64-byte aligned; throws cumulus::Error (kLimit) when the memory cannot be had.
Block allocate(std::size_t bytes);
void release(Block block) noexcept;

}  // namespace cumulus::detail
