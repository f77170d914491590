// Reduced kernels for bench_kernels. The float32 row scan's one pass alone (load, widen to double,
// in-register prefix, plus the running carry, narrow, store), with none of the certificate, the
// carry's split, the rounding variants or the block loop around it: it bounds what that pass can
// cost on a core, so a float32 long row's time can be set against it (Compute/CumSum/float32 runs
// the whole kernel on the same 16384 elements). And the float32 column step alone (below). Neither
// is exact in general.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "kernels/tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace cumulus::bench {

#if defined(__x86_64__)
namespace detail {

// Eight doubles: the inclusive prefix in three steps, as the AVX-512 kernels form it.
__attribute__((target("avx512f"))) inline __m512d prefix8(__m512d v) {
  v = _mm512_mask_add_pd(v, 0xAA, v, _mm512_unpacklo_pd(v, v));
  v = _mm512_mask_add_pd(v, 0xCC, v, _mm512_permutex_pd(v, 0x55));
  return _mm512_mask_add_pd(v, 0xF0, v, _mm512_permutexvar_pd(_mm512_set1_epi64(3), v));
}

// Four doubles: two steps (pairs, then across the halves).
__attribute__((target("avx2"))) inline __m256d prefix4(__m256d v) {
  v = _mm256_add_pd(v, _mm256_blend_pd(_mm256_setzero_pd(), _mm256_unpacklo_pd(v, v), 0xA));
  const __m256d low1 = _mm256_permute4x64_pd(v, 0x55);  // lane 1 everywhere
  return _mm256_add_pd(v, _mm256_blend_pd(_mm256_setzero_pd(), low1, 0xC));
}

}  // namespace detail

namespace detail {
// Asks for the line as far ahead of p as the kernels ask (kPrefetchBytes); the address formed as
// an integer, since it may lie past the buffer, as the kernels' prefetch_at does.
inline void reduced_ahead(const float* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p) +
                  static_cast<std::uintptr_t>(cumulus::detail::kPrefetchBytes);
  __builtin_prefetch(reinterpret_cast<const void*>(at), 0, 3);
}
}  // namespace detail

// Sixteen elements a step, two vectors of eight doubles, from `start`; n a multiple of 16. kMemory:
// as a long row's pass from memory goes, asking as far ahead as the kernels and streaming its
// outputs (y 64-byte aligned).
template <bool kMemory = false>
__attribute__((target("avx512f"))) inline double reduced_scan_avx512(const float* x, float* y,
                                                                     std::size_t n,
                                                                     double start = 0) {
  __m512d running = _mm512_set1_pd(start);
  const __m512i last = _mm512_set1_epi64(7);
  for (std::size_t i = 0; i < n; i += 16) {
    if constexpr (kMemory) detail::reduced_ahead(x + i);
    const __m512d first = detail::prefix8(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
    const __m512d second = detail::prefix8(_mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)));
    const __m512d last_first = _mm512_permutexvar_pd(last, first);
    const __m256 a = _mm512_cvtpd_ps(_mm512_add_pd(running, first));
    const __m256 b = _mm512_cvtpd_ps(_mm512_add_pd(_mm512_add_pd(running, last_first), second));
    if constexpr (kMemory) {
      _mm256_stream_ps(y + i, a);
      _mm256_stream_ps(y + i + 8, b);
    } else {
      _mm256_storeu_ps(y + i, a);
      _mm256_storeu_ps(y + i + 8, b);
    }
    running =
        _mm512_add_pd(running, _mm512_add_pd(last_first, _mm512_permutexvar_pd(last, second)));
  }
  return _mm512_cvtsd_f64(running);
}

// The same with four doubles a vector, sixteen elements a step.
template <bool kMemory = false>
__attribute__((target("avx2"))) inline double reduced_scan_avx2(const float* x, float* y,
                                                                std::size_t n, double start = 0) {
  __m256d running = _mm256_set1_pd(start);
  for (std::size_t i = 0; i < n; i += 16) {
    if constexpr (kMemory) detail::reduced_ahead(x + i);
    __m128 out[4];
    for (std::size_t q = 0; q < 16; q += 4) {
      const __m256d p = detail::prefix4(_mm256_cvtps_pd(_mm_loadu_ps(x + i + q)));
      out[q / 4] = _mm256_cvtpd_ps(_mm256_add_pd(running, p));
      if constexpr (!kMemory) _mm_storeu_ps(y + i + q, out[q / 4]);
      running = _mm256_add_pd(running, _mm256_permute4x64_pd(p, 0xFF));
    }
    if constexpr (kMemory) {  // 32-byte streamed stores, as the kernels' AVX2 layer makes them
      _mm256_stream_ps(y + i, _mm256_set_m128(out[1], out[0]));
      _mm256_stream_ps(y + i + 8, _mm256_set_m128(out[3], out[2]));
    }
  }
  return _mm256_cvtsd_f64(running);
}

// A long row's total as the split takes it (the sum of n floats in double lanes, asking ahead),
// without the range the kernels gather beside it; n a multiple of 16. Exact where the terms'
// partial sums are doubles, in any order.
__attribute__((target("avx512f"))) inline double reduced_total_avx512(const float* x,
                                                                      std::size_t n) {
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
  for (std::size_t i = 0; i < n; i += 16) {
    detail::reduced_ahead(x + i);
    a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
    b = _mm512_add_pd(b, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(a, b));
}

__attribute__((target("avx2"))) inline double reduced_total_avx2(const float* x, std::size_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
  for (std::size_t i = 0; i < n; i += 16) {
    detail::reduced_ahead(x + i);
    for (std::size_t q = 0; q < 4; ++q) {
      acc[q] = _mm256_add_pd(acc[q], _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * q)));
    }
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes,
                  _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

// The float32 column step as the exact kernel takes it while every column's sum is one double
// (exact_cols.inc's vfast_step), over one tile of 512 columns, x's [c0, c0 + 512) of shape
// [length, inner]: a step at a time, the row eight steps on asked for, each term widened and added
// to its column's double, the addition's TwoSum error gathered (the kernel's exactness test; here
// only returned), the sum narrowed and streamed out (y's rows aligned to 32 bytes). None of the
// kernel's state buffers, fix-ups or tile bookkeeping.
inline constexpr std::size_t kReducedColumnTile = 512;

namespace detail {
// Row i of the tile at c0, in x and in y; the row eight steps on asked for.
inline std::pair<const float*, float*> column_row(const float* x, float* y, std::size_t i,
                                                  std::size_t length, std::size_t inner,
                                                  std::size_t c0) {
  if (i + 8 < length) {
    const char* ahead = reinterpret_cast<const char*>(x + (i + 8) * inner + c0);
    for (std::size_t b = 0; b < kReducedColumnTile * sizeof(float); b += 64) {
      __builtin_prefetch(ahead + b);
    }
  }
  return {x + i * inner + c0, y + i * inner + c0};
}
}  // namespace detail

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512dq"))) inline double reduced_columns_avx512(
    const float* x, float* y, std::size_t length, std::size_t inner, std::size_t c0) {
  alignas(64) double acc[kReducedColumnTile] = {};
  __m512d flag = _mm512_setzero_pd();
  for (std::size_t i = 0; i < length; ++i) {
    const auto [xr, yr] = detail::column_row(x, y, i, length, inner, c0);
    for (std::size_t j = 0; j < kReducedColumnTile; j += 8) {
      const __m512d h = _mm512_load_pd(acc + j);
      const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(xr + j));
      const __m512d s = _mm512_add_pd(h, v);
      const __m512d bb = _mm512_sub_pd(s, h);
      const __m512d e = _mm512_add_pd(_mm512_sub_pd(h, _mm512_sub_pd(s, bb)), _mm512_sub_pd(v, bb));
      flag = _mm512_or_pd(flag, e);
      _mm512_store_pd(acc + j, s);
      _mm256_stream_ps(yr + j, _mm512_cvtpd_ps(s));
    }
  }
  return _mm512_reduce_add_pd(flag);
}

__attribute__((target("avx2"))) inline double reduced_columns_avx2(const float* x, float* y,
                                                                   std::size_t length,
                                                                   std::size_t inner,
                                                                   std::size_t c0) {
  alignas(64) double acc[kReducedColumnTile] = {};
  __m256d flag = _mm256_setzero_pd();
  for (std::size_t i = 0; i < length; ++i) {
    const auto [xr, yr] = detail::column_row(x, y, i, length, inner, c0);
    for (std::size_t j = 0; j < kReducedColumnTile; j += 8) {
      __m128 out[2];
      for (int q = 0; q < 2; ++q) {
        const __m256d h = _mm256_load_pd(acc + j + 4 * q);
        const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(xr + j + 4 * q));
        const __m256d s = _mm256_add_pd(h, v);
        const __m256d bb = _mm256_sub_pd(s, h);
        const __m256d e =
            _mm256_add_pd(_mm256_sub_pd(h, _mm256_sub_pd(s, bb)), _mm256_sub_pd(v, bb));
        flag = _mm256_or_pd(flag, e);
        _mm256_store_pd(acc + j + 4 * q, s);
        out[q] = _mm256_cvtpd_ps(s);
      }
      _mm256_stream_ps(yr + j, _mm256_set_m128(out[1], out[0]));
    }
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, flag);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

// The reduced scan on the widest of these instruction sets the CPU has, or on AVX2 where `avx2`
// asks for it (as CUMULUS_ISA=avx2 does for the kernels), chosen once: the kernel and the
// instruction set's name, or null and an empty name where there is none.
using ReducedScan = double (*)(const float* x, float* y, std::size_t n);
inline std::pair<ReducedScan, std::string_view> reduced_scan(bool avx2) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!avx2 && __builtin_cpu_supports("avx512f")) {
    return {[](const float* x, float* y, std::size_t n) { return reduced_scan_avx512(x, y, n); },
            "avx512"};
  }
  if (__builtin_cpu_supports("avx2")) {
    return {[](const float* x, float* y, std::size_t n) { return reduced_scan_avx2(x, y, n); },
            "avx2"};
  }
#endif
  (void)avx2;
  return {nullptr, {}};
}

// The memory variants (kMemory) and the total, chosen as reduced_scan chooses.
struct ReducedSplit {
  double (*scan)(const float* x, float* y, std::size_t n, double start) = nullptr;
  double (*total)(const float* x, std::size_t n) = nullptr;
  explicit operator bool() const { return scan != nullptr; }
};
inline std::pair<ReducedSplit, std::string_view> reduced_split(bool avx2) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!avx2 && __builtin_cpu_supports("avx512f")) {
    return {{&reduced_scan_avx512<true>, &reduced_total_avx512}, "avx512"};
  }
  if (__builtin_cpu_supports("avx2")) {
    return {{&reduced_scan_avx2<true>, &reduced_total_avx2}, "avx2"};
  }
#endif
  (void)avx2;
  return {{}, {}};
}

// reduced_scan's choice for the column step.
using ReducedColumns = double (*)(const float* x, float* y, std::size_t length, std::size_t inner,
                                  std::size_t c0);
inline std::pair<ReducedColumns, std::string_view> reduced_columns(bool avx2) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) {
    return {&reduced_columns_avx512, "avx512"};
  }
  if (__builtin_cpu_supports("avx2")) return {&reduced_columns_avx2, "avx2"};
#endif
  (void)avx2;
  return {nullptr, {}};
}

}  // namespace cumulus::bench
