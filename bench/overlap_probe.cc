// How much of a streaming scan's arithmetic this machine lets run under its memory traffic: a
// reduced scan kernel whose arithmetic per 64-byte line is a knob, timed from memory and in cache.
// Each line of float32 is loaded (asked for 8 KiB ahead, as the kernels do), goes through WORK
// dependent steps (a lane permute and an add each, the shape of an in-vector prefix), takes a
// carry (one add, and the last lane broadcast: a chain from line to line, as a scan's), and is
// stored: with streaming stores from memory (as the kernels write large outputs), with ordinary
// stores in cache. From memory it reads and writes BYTES each; in cache each thread runs over its
// own CACHE bytes in and out (64 KiB unless told), as many times as make up the same BYTES. The
// plain streaming copy (streaming.h, compare.py's ceiling) is timed in the same rounds. For each
// thread count and WORK it prints the medians of the rounds (ms): copy, in cache, from memory, and
// the overlap: the share of the smaller of copy and in cache that the memory run hides, (copy +
// cache - memory) / min(copy, cache): 0 where the two add up, 100% where the row from memory takes
// only the longer of them. Build: with the benchmarks (CUMULUS_BUILD_BENCH); run: overlap_probe
// [--threads N] [--rounds N]
// [--bytes N] [--cache-bytes N] [--isa avx512|avx2] [WORK...].
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "streaming.h"

#if !defined(__x86_64__)
int main() {
  std::fprintf(stderr, "overlap_probe: x86-64 only\n");
  return 1;
}
#else
#include <immintrin.h>

namespace {

using cumulus::bench::median;
using cumulus::bench::StreamIsa;
using cumulus::bench::StreamRegion;
using cumulus::bench::StreamTeam;
using cumulus::bench::time_ms;

// How far ahead each line's input is asked for (--ahead; 0: not asked).
std::size_t g_ahead = 8192;

// Asks for the line g_ahead bytes past byte i of src (as an integer: it may lie past the buffer,
// which a prefetch never faults on).
inline void ask_ahead(const char* src, std::size_t i) {
  if (g_ahead == 0) return;
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(src) + i + g_ahead),
               _MM_HINT_T0);
}

// One line's steps: v + (v permuted), WORK times, then the carry.
template <bool kStream>
__attribute__((target("avx512f"))) void probe_avx512(char* dst, const char* src, std::size_t bytes,
                                                     int work) {
  const __m512i rotations[4] = {
      _mm512_setr_epi32(15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14),
      _mm512_setr_epi32(14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13),
      _mm512_setr_epi32(12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11),
      _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)};
  const __m512i last = _mm512_set1_epi32(15);
  __m512 carry = _mm512_setzero_ps();
  for (std::size_t i = 0; i < bytes; i += 64) {
    ask_ahead(src, i);
    __m512 v = _mm512_load_ps(src + i);
    for (int w = 0; w < work; ++w) {
      v = _mm512_add_ps(v, _mm512_maskz_permutexvar_ps(0xFFFF, rotations[w & 3], v));
    }
    v = _mm512_add_ps(v, carry);
    carry = _mm512_maskz_permutexvar_ps(0xFFFF, last, v);  // maskz: no undefined source
    if constexpr (kStream) {
      _mm512_stream_ps(reinterpret_cast<float*>(dst + i), v);
    } else {
      _mm512_store_ps(reinterpret_cast<float*>(dst + i), v);
    }
  }
  if constexpr (kStream) _mm_sfence();
}

template <bool kStream>
__attribute__((target("avx2"))) void probe_avx2(char* dst, const char* src, std::size_t bytes,
                                                int work) {
  const __m256i rotations[3] = {_mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6),
                                _mm256_setr_epi32(6, 7, 0, 1, 2, 3, 4, 5),
                                _mm256_setr_epi32(4, 5, 6, 7, 0, 1, 2, 3)};
  const __m256i last = _mm256_set1_epi32(7);
  __m256 carry = _mm256_setzero_ps();
  for (std::size_t i = 0; i < bytes; i += 64) {
    ask_ahead(src, i);
    __m256 a = _mm256_load_ps(reinterpret_cast<const float*>(src + i));
    __m256 b = _mm256_load_ps(reinterpret_cast<const float*>(src + i + 32));
    for (int w = 0; w < work; ++w) {
      a = _mm256_add_ps(a, _mm256_permutevar8x32_ps(a, rotations[w % 3]));
      b = _mm256_add_ps(b, _mm256_permutevar8x32_ps(b, rotations[w % 3]));
    }
    a = _mm256_add_ps(a, carry);
    b = _mm256_add_ps(b, _mm256_permutevar8x32_ps(a, last));
    carry = _mm256_permutevar8x32_ps(b, last);
    auto* out = reinterpret_cast<float*>(dst + i);
    if constexpr (kStream) {
      _mm256_stream_ps(out, a);
      _mm256_stream_ps(out + 8, b);
    } else {
      _mm256_store_ps(out, a);
      _mm256_store_ps(out + 8, b);
    }
  }
  if constexpr (kStream) _mm_sfence();
}

void probe(StreamIsa isa, bool stream, char* dst, const char* src, std::size_t bytes, int work) {
  if (isa == StreamIsa::kAvx512) {
    stream ? probe_avx512<true>(dst, src, bytes, work) : probe_avx512<false>(dst, src, bytes, work);
  } else {
    stream ? probe_avx2<true>(dst, src, bytes, work) : probe_avx2<false>(dst, src, bytes, work);
  }
}

bool parse_count(const char* text, long long& out) {
  char* end = nullptr;
  out = std::strtoll(text, &end, 10);
  return end != text && *end == '\0' && out >= 0;
}

int usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "overlap_probe: %s\n", why);
  std::fprintf(
      stderr,
      "usage: overlap_probe [--threads N] [--rounds N] [--bytes N] [--cache-bytes N]\n"
      "                     [--ahead BYTES] [--plain-stores]\n"
      "                     [--isa avx512|avx2] [WORK...]\n"
      "times a reduced streaming scan with WORK permute-and-add steps a 64-byte line,\n"
      "from memory and in cache, against the streaming copy (ms, medians of the rounds)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long long threads = 2, rounds = 5, bytes = 256ll << 20, cache_bytes = 64ll << 10;
  StreamIsa isa = cumulus::bench::best_stream_isa();
  std::vector<int> works;
  bool plain_stores = false;  // from memory: ordinary stores, not streaming ones
  for (int a = 1; a < argc; ++a) {
    const std::string_view arg = argv[a];
    long long value = 0;
    if (arg == "--isa" && a + 1 < argc) {
      const std::string_view name = argv[++a];
      if (name == "avx512") {
        isa = StreamIsa::kAvx512;
      } else if (name == "avx2") {
        isa = StreamIsa::kAvx2;
      } else {
        return usage("--isa takes avx512 or avx2");
      }
    } else if (arg == "--plain-stores") {
      plain_stores = true;
    } else if (arg == "--ahead" && a + 1 < argc) {
      if (!parse_count(argv[++a], value)) return usage("--ahead takes a count of bytes");
      g_ahead = static_cast<std::size_t>(value);
    } else if ((arg == "--threads" || arg == "--rounds" || arg == "--bytes" ||
                arg == "--cache-bytes") &&
               a + 1 < argc) {
      if (!parse_count(argv[++a], value) || value < 1) return usage("counts must be positive");
      (arg == "--threads"  ? threads
       : arg == "--rounds" ? rounds
       : arg == "--bytes"  ? bytes
                           : cache_bytes) = value;
    } else if (parse_count(argv[a], value) && value <= 64) {
      works.push_back(static_cast<int>(value));
    } else {
      return usage(("unknown argument " + std::string(arg)).c_str());
    }
  }
  if (works.empty()) works = {0, 1, 2, 3, 4, 6, 8};
  __builtin_cpu_init();
  if ((isa == StreamIsa::kAvx512 && !__builtin_cpu_supports("avx512f")) ||
      !__builtin_cpu_supports("avx2")) {
    return usage("this CPU lacks the instruction set asked for");
  }
  const std::size_t kCacheBlock = static_cast<std::size_t>(cache_bytes) / 64 * 64;
  const std::size_t n = static_cast<std::size_t>(bytes) / kCacheBlock * kCacheBlock;
  if (kCacheBlock == 0 || n == 0)
    return usage("--bytes must be at least --cache-bytes, 64 or more");
  const std::size_t stride = cumulus::bench::stream_stride(n);
  const StreamRegion region(2 * stride);
  const StreamRegion cache_region(static_cast<std::size_t>(threads) * 2 *
                                  cumulus::bench::stream_stride(kCacheBlock));
  if (region.data() == nullptr || cache_region.data() == nullptr) {
    std::fprintf(stderr, "overlap_probe: cannot allocate %zu bytes\n", region.size());
    return 1;
  }
  const char* src = region.data();
  char* dst = region.data() + stride;

  std::printf("isa %s, %zu bytes in and out, in cache %zu, %lld rounds (ms, medians)\n",
              std::string(cumulus::bench::stream_isa_name(isa)).c_str(), n, kCacheBlock, rounds);
  std::printf("%7s %4s %8s %8s %8s %8s\n", "threads", "work", "copy", "cache", "memory", "overlap");
  std::vector<long long> thread_counts{1};
  if (threads > 1) thread_counts.push_back(threads);
  for (const long long t : thread_counts) {
    StreamTeam team(static_cast<int>(t));
    // Each thread's own in-cache block, handed out on its first chunk with this team.
    static std::atomic<int> team_count{0};
    const int team_id = ++team_count;
    std::atomic<int> next_block{0};
    const auto cache_block = [&](int& b) {
      thread_local int block = 0, block_team = 0;
      if (block_team != team_id) {
        block = next_block.fetch_add(1);
        block_team = team_id;
      }
      b = block;
    };
    std::vector<std::vector<double> > copy(works.size()), cache(works.size()), memory(works.size());
    for (long long r = 0; r < rounds + 1; ++r) {  // round 0 warms up
      for (std::size_t w = 0; w < works.size(); ++w) {
        const int work = works[w];
        const double c = time_ms([&] {
          team.run(n, [&](std::size_t begin, std::size_t end) {
            const char* from = src + begin;
            cumulus::bench::stream_add(isa, dst + begin, &from, 1, 0, end - begin);
          });
        });
        const double k = time_ms([&] {
          team.run(n, [&](std::size_t begin, std::size_t end) {
            int b = 0;
            cache_block(b);
            char* base = cache_region.data() + static_cast<std::size_t>(b) * 2 *
                                                   cumulus::bench::stream_stride(kCacheBlock);
            // Chunk [begin, end) maps onto the block at begin's offset in it, wrapping at the
            // block's end, so a block larger than a chunk is walked whole, not its head again.
            for (std::size_t at = begin; at < end;) {
              const std::size_t offset = at % kCacheBlock;
              const std::size_t length = std::min(kCacheBlock - offset, end - at);
              probe(isa, false, base + cumulus::bench::stream_stride(kCacheBlock) + offset,
                    base + offset, length, work);
              at += length;
            }
          });
        });
        const double m = time_ms([&] {
          team.run(n, [&](std::size_t begin, std::size_t end) {
            probe(isa, !plain_stores, dst + begin, src + begin, end - begin, work);
          });
        });
        if (r > 0) {
          copy[w].push_back(c);
          cache[w].push_back(k);
          memory[w].push_back(m);
        }
      }
    }
    for (std::size_t w = 0; w < works.size(); ++w) {
      const double c = median(copy[w]), k = median(cache[w]), m = median(memory[w]);
      std::printf("%7lld %4d %8.2f %8.2f %8.2f %7.0f%%\n", t, works[w], c, k, m,
                  100 * (c + k - m) / std::min(c, k));
    }
  }
  return 0;
}
#endif
