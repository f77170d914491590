// Picks the kernel table once per process: the best instruction set the CPU has, capped by
// CUMULUS_ISA so tests and users can force a lower path.
#include <cpuid.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cumulus/ops.h"
#include "kernels/kernels.h"

namespace cumulus::detail {
namespace {

enum class Isa { kScalar, kAvx2, kAvx512 };

Isa best_supported() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
    return Isa::kAvx512;
  }
  // F16C from CPUID directly: clang before 15 does not know it as a __builtin_cpu_supports name.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
    return Isa::kAvx2;
  }
  return Isa::kScalar;
}

Isa chosen() {
  Isa isa = best_supported();
  if (const char* forced = std::getenv("CUMULUS_ISA")) {
    const std::string_view f(forced);
    const Isa cap = f == "scalar" ? Isa::kScalar : f == "avx2" ? Isa::kAvx2 : Isa::kAvx512;
    if (cap < isa) isa = cap;
  }
  return isa;
}

}  // namespace

const KernelTable& kernels() noexcept {
  static const KernelTable& table = []() -> const KernelTable& {
    switch (chosen()) {
      case Isa::kAvx512:
        return avx512_kernels();
      case Isa::kAvx2:
        return avx2_kernels();
      case Isa::kScalar:
        break;
    }
    return scalar_kernels();
  }();
  return table;
}

}  // namespace cumulus::detail

namespace cumulus {
std::string_view kernel_isa() noexcept { return detail::kernels().isa; }
}  // namespace cumulus
