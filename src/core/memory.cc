#include "core/memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include "core/fail.h"

namespace cumulus::detail {
namespace {

constexpr std::size_t kAlignment = 64;
constexpr std::size_t kHugePage = std::size_t{2} << 20;
// Blocks from here up go on huge pages and into the reuse cache.
constexpr std::size_t kLarge = std::size_t{1} << 20;
// At most this much freed memory is kept for reuse.
constexpr std::size_t kCacheLimit = std::size_t{4} << 30;

class BlockCache {
 public:
  // A cached block of at least `bytes` and at most twice that, or null.
  std::byte* take(std::size_t bytes, std::size_t& capacity) {
    std::lock_guard lock(mutex_);
    const auto it = free_.lower_bound(bytes);
    if (it == free_.end() || it->first > 2 * bytes) return nullptr;
    capacity = it->first;
    std::byte* p = it->second;
    cached_ -= it->first;
    free_.erase(it);
    return p;
  }

  void put(Block block) noexcept {
    std::unique_lock lock(mutex_);
    while (!free_.empty() && cached_ + block.capacity > kCacheLimit) {
      const auto largest = std::prev(free_.end());
      cached_ -= largest->first;
      std::free(largest->second);
      free_.erase(largest);
    }
    if (block.capacity > kCacheLimit) {
      lock.unlock();
      std::free(block.data);
      return;
    }
    free_.emplace(block.capacity, block.data);
    cached_ += block.capacity;
  }

 private:
  std::mutex mutex_;
  std::multimap<std::size_t, std::byte*> free_;
  std::size_t cached_ = 0;
};

BlockCache& cache() {
  static auto* c = new BlockCache;  // outlives every static tensor
  return *c;
}

}  // namespace

Block allocate(std::size_t bytes) {
  if (bytes < kLarge) {
    bytes = std::max<std::size_t>(bytes, 1);
    void* p = ::operator new[](bytes, std::align_val_t{kAlignment}, std::nothrow);
    if (p == nullptr) fail(ErrorCode::kLimit, "cannot allocate {} bytes", bytes);
    return {static_cast<std::byte*>(p), 0};
  }
  std::size_t capacity = 0;
  if (std::byte* p = cache().take(bytes, capacity)) return {p, capacity};
  if (bytes > SIZE_MAX - kHugePage) fail(ErrorCode::kLimit, "cannot allocate {} bytes", bytes);
  capacity = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, capacity);
  if (p == nullptr) fail(ErrorCode::kLimit, "cannot allocate {} bytes", bytes);
  ::madvise(p, capacity, MADV_HUGEPAGE);  // advice only: failure changes nothing but speed
  return {static_cast<std::byte*>(p), capacity};
}

void release(Block block) noexcept {
  if (block.data == nullptr) return;
  if (block.capacity == 0) {
    ::operator delete[](block.data, std::align_val_t{kAlignment});
    return;
  }
  cache().put(block);
}

}  // namespace cumulus::detail
