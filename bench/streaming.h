// The streaming ceilings the kernels are measured against: the fastest this CPU moves a scan's or
// a Sum's bytes. A copy with non-temporal stores (read N bytes, write N bytes past the cache, as
// the kernels write large outputs) and a K-input add that streams its output. The work is split
// the way the library's pool splits it: chunks taken in turn from a shared counter by every
// thread, the caller's included. Each asks for its input 8 KiB ahead and its buffers lie on huge
// pages where the system grants them, as the kernels' reads and the library's large tensors do;
// the vector widths the CPU has are found at run time, and the timers take the fastest (on a Xeon
// with AVX-512, 256 MiB on two threads: 32-byte streaming stores 12.4-12.7 ms, 64-byte 13.7-13.9,
// against 14.7-14.8 for 64-byte stores without asking ahead, on 4 KiB pages).
// Used by bench_kernels.cc and by stream_timer.cc (the timer compare.py builds).
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace cumulus::bench {

// 128 KiB: the library's pieces and Sum tiles are 2^15 elements, 128 KiB of float32.
inline constexpr std::size_t kStreamChunk = std::size_t{128} << 10;
// Buffers handed to the streaming kernels start on this boundary; chunks are multiples of it.
inline constexpr std::size_t kStreamAlign = 64;
// How far ahead the kernels ask for their inputs, as the library's streaming loops do: one input
// kPrefetchBytes ahead, several that much shared between them (sum_prefetch_bytes), for at most
// kSumPrefetchStreams inputs.
inline constexpr std::size_t kStreamAhead = 8192;
inline constexpr int kStreamAheadInputs = 16;
inline std::size_t stream_ahead(int inputs) {
  return inputs > kStreamAheadInputs ? 0
                                     : kStreamAhead / static_cast<std::size_t>(inputs) / 64 * 64;
}

// The distance between the starts of consecutive buffers of `bytes` in one allocation: whole
// pages plus 17 lines, so that no two buffers share their offset within a page. Buffers a
// power of two apart would make each load alias the stores and loads of the other streams
// (4K aliasing, the same cache sets and DRAM banks) and hold the ceiling below what the memory
// can do.
inline std::size_t stream_stride(std::size_t bytes) {
  constexpr std::size_t kPage = 4096, kStagger = 17 * kStreamAlign;
  return (bytes + kPage - 1) / kPage * kPage + kStagger;
}

// sse2 is every x86-64 CPU (16-byte streaming stores); plain is any other CPU (ordinary stores).
enum class StreamIsa { kPlain, kSse2, kAvx2, kAvx512 };

inline StreamIsa best_stream_isa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return StreamIsa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return StreamIsa::kAvx2;
  return StreamIsa::kSse2;
#else
  return StreamIsa::kPlain;
#endif
}

// The streaming widths the timers try, widest first: AVX-512's and AVX2's where the CPU has
// AVX-512, else its best. The timers take the fastest.
inline std::vector<StreamIsa> stream_isas() {
  std::vector<StreamIsa> all;
  for (StreamIsa isa = best_stream_isa();;
       isa = static_cast<StreamIsa>(static_cast<int>(isa) - 1)) {
    all.push_back(isa);
    if (isa != StreamIsa::kAvx512) break;  // AVX2's and AVX-512's widths; SSE2's never won
  }
  return all;
}

inline std::string_view stream_isa_name(StreamIsa isa) {
  switch (isa) {
    case StreamIsa::kAvx512:
      return "avx512";
    case StreamIsa::kAvx2:
      return "avx2";
    case StreamIsa::kSse2:
      return "sse2";
    case StreamIsa::kPlain:
      break;
  }
  return "plain";
}

// The wall time of one body() in milliseconds.
template <class Body>
double time_ms(const Body& body) {
  const auto t0 = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The median of v: its middle value, or the mean of the middle two.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

namespace detail {

// The add is of 32-bit integer lanes, the cheapest there is, so that arithmetic never limits the
// ceiling; the bytes read and written are a Sum's whatever its type. Bytes past the last whole
// 64-byte line are added one by one.
inline void add_tail(char* dst, const char* const* src, int k, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) {
    unsigned char acc = static_cast<unsigned char>(src[0][i]);
    for (int j = 1; j < k; ++j) acc = static_cast<unsigned char>(acc + src[j][i]);
    dst[i] = static_cast<char>(acc);
  }
}

#if defined(__x86_64__)
// Asks for the lines of a 64-byte step stream_ahead(k) ahead in each input.
inline void ask_ahead(const char* const* src, int k, std::size_t i) {
  const std::size_t ahead = stream_ahead(k);
  if (ahead == 0) return;
  for (int j = 0; j < k; ++j) {
    // As an integer: the address may lie past the buffer, which a prefetch never faults on.
    const auto at = reinterpret_cast<std::uintptr_t>(src[j]) + i + ahead;
    _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T0);
  }
}

// Four lines per step for the copy, so the loop's own instructions stay out of the way.
__attribute__((target("avx512f"))) inline void copy_nt_avx512(char* dst, const char* src,
                                                              std::size_t i, std::size_t end) {
  for (; i + 256 <= end; i += 256) {
    for (std::size_t line = 0; line < 256; line += 64) ask_ahead(&src, 1, i + line);
    const __m512i a = _mm512_load_si512(src + i), b = _mm512_load_si512(src + i + 64),
                  c = _mm512_load_si512(src + i + 128), d = _mm512_load_si512(src + i + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i + 192), d);
  }
  for (; i + 64 <= end; i += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_load_si512(src + i));
  }
  add_tail(dst, &src, 1, i, end);
}

__attribute__((target("avx512f"))) inline void add_nt_avx512(char* dst, const char* const* src,
                                                             int k, std::size_t i,
                                                             std::size_t end) {
  for (; i + 64 <= end; i += 64) {
    ask_ahead(src, k, i);
    __m512i acc = _mm512_load_si512(src[0] + i);
    for (int j = 1; j < k; ++j) acc = _mm512_add_epi32(acc, _mm512_load_si512(src[j] + i));
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), acc);
  }
  add_tail(dst, src, k, i, end);
}

__attribute__((target("avx2"))) inline void copy_nt_avx2(char* dst, const char* src, std::size_t i,
                                                         std::size_t end) {
  for (; i + 128 <= end; i += 128) {
    ask_ahead(&src, 1, i);
    ask_ahead(&src, 1, i + 64);
    const auto* s = reinterpret_cast<const __m256i*>(src + i);
    auto* d = reinterpret_cast<__m256i*>(dst + i);
    const __m256i a = _mm256_load_si256(s), b = _mm256_load_si256(s + 1),
                  c = _mm256_load_si256(s + 2), e = _mm256_load_si256(s + 3);
    _mm256_stream_si256(d, a);
    _mm256_stream_si256(d + 1, b);
    _mm256_stream_si256(d + 2, c);
    _mm256_stream_si256(d + 3, e);
  }
  for (; i + 32 <= end; i += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(src + i)));
  }
  add_tail(dst, &src, 1, i, end);
}

__attribute__((target("avx2"))) inline void add_nt_avx2(char* dst, const char* const* src, int k,
                                                        std::size_t i, std::size_t end) {
  for (; i + 64 <= end; i += 64) {
    ask_ahead(src, k, i);
    __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(src[0] + i));
    __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(src[0] + i + 32));
    for (int j = 1; j < k; ++j) {
      lo = _mm256_add_epi32(lo, _mm256_load_si256(reinterpret_cast<const __m256i*>(src[j] + i)));
      hi = _mm256_add_epi32(hi,
                            _mm256_load_si256(reinterpret_cast<const __m256i*>(src[j] + i + 32)));
    }
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), lo);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), hi);
  }
  add_tail(dst, src, k, i, end);
}

inline void add_nt_sse2(char* dst, const char* const* src, int k, std::size_t i, std::size_t end) {
  for (; i + 16 <= end; i += 16) {
    if (i % 64 == 0) ask_ahead(src, k, i);
    __m128i acc = _mm_load_si128(reinterpret_cast<const __m128i*>(src[0] + i));
    for (int j = 1; j < k; ++j) {
      acc = _mm_add_epi32(acc, _mm_load_si128(reinterpret_cast<const __m128i*>(src[j] + i)));
    }
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), acc);
  }
  add_tail(dst, src, k, i, end);
}
#endif

}  // namespace detail

// dst[i] = src[0][i] + ... + src[k-1][i] for the bytes i in [begin, end), with streaming stores
// (k = 1: a copy). dst and every src start on kStreamAlign, and so does begin. Ends with a store
// fence, so the stores are done when it returns.
inline void stream_add(StreamIsa isa, char* dst, const char* const* src, int k, std::size_t begin,
                       std::size_t end) {
#if defined(__x86_64__)
  switch (isa) {
    case StreamIsa::kAvx512:
      k == 1 ? detail::copy_nt_avx512(dst, src[0], begin, end)
             : detail::add_nt_avx512(dst, src, k, begin, end);
      break;
    case StreamIsa::kAvx2:
      k == 1 ? detail::copy_nt_avx2(dst, src[0], begin, end)
             : detail::add_nt_avx2(dst, src, k, begin, end);
      break;
    case StreamIsa::kSse2:
    case StreamIsa::kPlain:
      detail::add_nt_sse2(dst, src, k, begin, end);
      break;
  }
  _mm_sfence();
#else
  (void)isa;
  detail::add_tail(dst, src, k, begin, end);
#endif
}

// One allocation for a timer's buffers: on 2 MiB boundaries, advised onto huge pages (Linux; the
// advice may go unheeded), every byte written once so that no page faults in while timing.
class StreamRegion {
 public:
  static constexpr std::size_t kHuge = std::size_t{2} << 20;
  explicit StreamRegion(std::size_t bytes)
      : bytes_((bytes + kHuge - 1) / kHuge * kHuge),
        base_(static_cast<char*>(std::aligned_alloc(kHuge, bytes_))) {
    if (base_ == nullptr) return;
#if defined(__linux__)
    ::madvise(base_, bytes_, MADV_HUGEPAGE);
#endif
    std::memset(base_, 1, bytes_);
  }
  ~StreamRegion() { std::free(base_); }
  StreamRegion(const StreamRegion&) = delete;
  StreamRegion& operator=(const StreamRegion&) = delete;

  char* data() const { return base_; }  // null where the allocation failed
  std::size_t size() const { return bytes_; }

 private:
  std::size_t bytes_;
  char* base_;
};

// Whether dst holds the sum of `inputs` buffers whose bytes are all 1: every byte equal to the
// input count (mod 256). The timers fill their inputs so, zero the output and check it after
// timing, so that a kernel that skipped work cannot pass for a fast one.
inline bool stream_output_ok(const char* dst, std::size_t bytes, int inputs) {
  for (std::size_t i = 0; i < bytes; ++i) {
    if (static_cast<unsigned char>(dst[i]) != static_cast<unsigned char>(inputs)) return false;
  }
  return true;
}

// A fixed team of threads that runs fn(begin, end) over [0, bytes) in kStreamChunk chunks, each
// thread taking the next chunk from a shared counter, as the library's pool does. The threads
// live as long as the team, so a run pays no thread start.
class StreamTeam {
 public:
  explicit StreamTeam(int threads) : start_(threads), done_(threads) {
    for (int t = 1; t < threads; ++t) {
      workers_.emplace_back([this] {
        for (;;) {
          start_.arrive_and_wait();
          if (stop_) return;
          drain();
          done_.arrive_and_wait();
        }
      });
    }
  }
  ~StreamTeam() {
    stop_ = true;
    if (!workers_.empty()) start_.arrive_and_wait();
    for (auto& w : workers_) w.join();
  }
  StreamTeam(const StreamTeam&) = delete;
  StreamTeam& operator=(const StreamTeam&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  template <class Fn>
  void run(std::size_t bytes, const Fn& fn) {
    fn_ = [](const void* context, std::size_t begin, std::size_t end) {
      (*static_cast<const Fn*>(context))(begin, end);
    };
    context_ = &fn;
    bytes_ = bytes;
    next_.store(0);
    if (workers_.empty()) {
      drain();
      return;
    }
    start_.arrive_and_wait();
    drain();
    done_.arrive_and_wait();
  }

 private:
  void drain() {
    for (;;) {
      const std::size_t begin = next_.fetch_add(kStreamChunk);
      if (begin >= bytes_) return;
      fn_(context_, begin, std::min(bytes_, begin + kStreamChunk));
    }
  }

  std::barrier<> start_, done_;
  std::vector<std::thread> workers_;
  // Written by the caller before start_ and read by the workers after it: the barrier orders them.
  void (*fn_)(const void*, std::size_t, std::size_t) = nullptr;
  const void* context_ = nullptr;
  std::size_t bytes_ = 0;
  std::atomic<std::size_t> next_{0};
  bool stop_ = false;
};

}  // namespace cumulus::bench
