// Helpers shared by the fuzz targets.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "cumulus/tensor.h"

namespace fuzz {

inline std::span<const std::byte> as_bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}
inline std::span<const std::byte> as_bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// What the current input chose besides its case (fuzz_ops: the kernels and thresholds), shown
// with a finding; empty for the other targets.
inline std::string& finding_context() {
  static std::string context;
  return context;
}

// A broken promise: say what, then abort() so libFuzzer saves the input (and a replay fails).
template <class... Args>
[[noreturn]] void finding(fmt::format_string<Args...> format, Args&&... args) {
  const std::string& context = finding_context();
  fmt::print(stderr, "FINDING: {}{}{}\n", fmt::format(format, std::forward<Args>(args)...),
             context.empty() ? "" : " with ", context);
  std::fflush(stderr);
  std::abort();
}

// Keeps every run small and fast: a request beyond this fails with ErrorCode::kLimit, which the
// targets treat as an expected outcome, instead of libFuzzer's out-of-memory report.
inline void limit_memory() {
  static const bool once = [] {
    cumulus::set_memory_limit(std::size_t{64} << 20);
    return true;
  }();
  (void)once;
}

// Same dtype, shape and bytes.
inline bool identical(const cumulus::Tensor& a, const cumulus::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

// Reads the fuzzer's bytes as a stream of choices; past the end every read gives zeros, so
// short inputs still decode to something.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool flag() { return (byte() & 1) != 0; }
  // A number in [0, n) for n >= 1, from one byte (or two when n > 256).
  uint32_t below(uint32_t n) {
    const uint32_t v = n > 256 ? byte() | (uint32_t{byte()} << 8) : byte();
    return v % n;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{byte()} << (8 * i);
    return v;
  }
  // n bytes into `out`, zeros past the end.
  void fill(void* out, size_t n) {
    const size_t take = pos_ < size_ ? std::min(n, size_ - pos_) : 0;
    if (take != 0) std::memcpy(out, data_ + pos_, take);
    if (take != n) std::memset(static_cast<unsigned char*>(out) + take, 0, n - take);
    pos_ += take;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace fuzz
