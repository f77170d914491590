// What the exact-kernel suites share: each element type's format for exact.h, its bits, a NaN test
// on bits, conversions through the binary128 reference, and the kernel tables this CPU can run.
#pragma once

#include <cpuid.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cumulus/dtype.h"
#include "exact.h"
#include "kernels/kernels.h"
#include "reference.h"

namespace exact_test {

template <class T>
constexpr exact::Format kFormat = exact::kBinary32;
template <>
constexpr exact::Format kFormat<double> = exact::kBinary64;
template <>
constexpr exact::Format kFormat<cumulus::Float16> = exact::kBinary16;
template <>
constexpr exact::Format kFormat<cumulus::BFloat16> = exact::kBFloat16;

template <class T>
uint64_t bits(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

inline bool nan_bits(uint64_t b, exact::Format f) {
  const uint64_t mantissa = (uint64_t{1} << (f.precision - 1)) - 1;
  const uint64_t exponent = ((uint64_t{1} << f.exp_bits) - 1) << (f.precision - 1);
  return (b & exponent) == exponent && (b & mantissa) != 0;
}

template <class T>
T of(double d) {
  return ref::Num<T>::from_double_rounded(d);
}
template <class T>
double value(T v) {
  return ref::Num<T>::to_double(v);
}

// Whether the CPU has AVX512-FP16 (CPUID leaf 7, EDX bit 23, as dispatch.cc finds it).
inline bool cpu_has_avx512fp16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (edx & (1u << 23)) != 0;
}

// The scalar table, and the AVX2, AVX-512 and AVX512-FP16 ones where this CPU has their
// instructions.
inline std::vector<const cumulus::detail::KernelTable*> kernel_tables() {
  std::vector<const cumulus::detail::KernelTable*> t = {&cumulus::detail::scalar_kernels()};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    t.push_back(&cumulus::detail::avx2_kernels());
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    t.push_back(&cumulus::detail::avx512_kernels());
    if (cpu_has_avx512fp16()) t.push_back(&cumulus::detail::avx512fp16_kernels());
  }
  return t;
}

}  // namespace exact_test
