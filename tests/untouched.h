// Address space that reads as zeros and is never touched: more bytes than protobuf takes, at no
// cost in memory, for the tests of the 2 GiB limits.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <span>

class Untouched {
 public:
  explicit Untouched(std::size_t size)
      : size_(size),
        data_(
            ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)) {}
  Untouched(const Untouched&) = delete;
  Untouched& operator=(const Untouched&) = delete;
  ~Untouched() {
    if (data_ != MAP_FAILED) ::munmap(data_, size_);
  }
  bool mapped() const { return data_ != MAP_FAILED; }
  const void* data() const { return data_; }
  std::span<const std::byte> bytes(std::size_t n) const {
    return {static_cast<const std::byte*>(data_), n};
  }

 private:
  std::size_t size_;
  void* data_;
};
