#include "core/memory.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <string>

#include "core/fail.h"
#include "cumulus/tensor.h"

namespace cumulus {
namespace {

// "4096", "512M", "2G": bytes, with an optional power-of-1024 suffix.
std::optional<std::size_t> parse_size(std::string_view text) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view rest(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (rest.size() > 1) return std::nullopt;
  int shift = 0;
  if (!rest.empty()) {
    const std::string_view suffixes = "KMGT";
    const auto at = suffixes.find(static_cast<char>(rest[0] & ~0x20));
    if (at == std::string_view::npos) return std::nullopt;
    shift = 10 * static_cast<int>(at + 1);
  }
  if (shift != 0 && value > (SIZE_MAX >> shift)) return std::nullopt;
  return value << shift;
}

std::size_t machine_memory() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::size_t bytes = pages > 0 && page > 0
                          ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                          : SIZE_MAX;
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");  // "max" when the group has no limit
  std::string text;
  if (cgroup >> text) {
    if (const auto limit = parse_size(text); limit && *limit < bytes) bytes = *limit;
  }
  return bytes;
}

std::size_t initial_limit() {
  if (const char* text = std::getenv("CUMULUS_MEMORY_LIMIT")) {
    const auto value = parse_size(text);
    if (!value) {
      detail::fail(ErrorCode::kInvalidArgument,
                   "CUMULUS_MEMORY_LIMIT={:?} is not a size (bytes, or a number with K, M, G or "
                   "T)",
                   text);
    }
    return *value;
  }
  return machine_memory();
}

std::atomic<std::size_t>& limit_storage() {
  static std::atomic<std::size_t> limit{initial_limit()};
  return limit;
}

// "4398046511104 bytes (4.0 TiB)"
std::string bytes_text(std::size_t bytes) {
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  auto value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  for (; value >= 1024 && unit < 5; ++unit) value /= 1024;
  return fmt::format("{} bytes ({:.1f} {})", bytes, value, units[unit]);
}

}  // namespace

void set_memory_limit(std::size_t bytes) { limit_storage().store(bytes); }
std::size_t memory_limit() { return limit_storage().load(); }

void check_memory_limit(std::size_t bytes, std::string_view what) {
  const std::size_t limit = limit_storage().load();
  if (bytes <= limit) return;
  detail::fail(ErrorCode::kLimit,
               "{} needs {}, more than the memory limit of {}; the limit is set by "
               "CUMULUS_MEMORY_LIMIT or cumulus::set_memory_limit",
               what, bytes_text(bytes), bytes_text(limit));
}

}  // namespace cumulus

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

  // Held across fork(): a child must not start with the mutex locked by a thread it does not
  // have, or with the list half changed (it would wait for ever at its first large allocation).
  void lock() { mutex_.lock(); }
  void unlock() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
  std::multimap<std::size_t, std::byte*> free_;
  std::size_t cached_ = 0;
};

BlockCache& cache() {
  static auto* c = new BlockCache;  // outlives every static tensor
  return *c;
}

// fork() in one thread while another is inside the memory's one-time setup (the limit's first
// read, a function-local static) or holds the block cache: the child would find the setup in
// progress for ever or the cache locked, and wait at its first allocation. The handlers,
// registered as the library loads, finish the setup first (waiting for a thread inside it) and
// hold the cache across fork().
void before_fork() {
  try {
    static_cast<void>(memory_limit());
  } catch (...) {  // a malformed CUMULUS_MEMORY_LIMIT: the next call reports it, as before
  }
  cache().lock();
}
void after_fork() { cache().unlock(); }
[[maybe_unused]] const bool fork_handlers =
    pthread_atfork(before_fork, after_fork, after_fork) == 0;

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
