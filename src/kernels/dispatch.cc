// Picks the kernel table once per process: the best instruction set the CPU has, capped by
// CUMULUS_ISA so tests and users can force a lower path. A CUMULUS_ISA that names no set is an
// error, not "no cap": a misspelt cap would otherwise run, and test, the wrong kernels.
#include <cpuid.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/fail.h"
#include "cumulus/ops.h"
#include "kernels/kernels.h"

namespace cumulus::detail {
namespace {

enum class Isa { kScalar, kAvx2, kAvx512, kAvx512Fp16 };

Isa best_supported() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
    // AVX512-FP16 from CPUID (leaf 7, EDX bit 23): GCC 12 and clang 14 do not report it as a
    // __builtin_cpu_supports name.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool fp16 =
        __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (edx & (1u << 23)) != 0;
    return fp16 ? Isa::kAvx512Fp16 : Isa::kAvx512;
  }
  // F16C from CPUID directly: clang before 15 does not know it as a __builtin_cpu_supports name.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
    return Isa::kAvx2;
  }
  return Isa::kScalar;
}

// The cap CUMULUS_ISA sets; unset or empty: none.
Isa isa_cap() {
  const char* text = std::getenv("CUMULUS_ISA");
  if (text == nullptr || *text == '\0') return Isa::kAvx512Fp16;
  const std::string_view name(text);
  if (name == "scalar") return Isa::kScalar;
  if (name == "avx2") return Isa::kAvx2;
  if (name == "avx512") return Isa::kAvx512;
  if (name == "avx512fp16") return Isa::kAvx512Fp16;
  fail(ErrorCode::kInvalidArgument,
       "CUMULUS_ISA={:?} is not an instruction set; valid: scalar, avx2, avx512, avx512fp16 (or "
       "unset, for the best this CPU has)",
       name);
}

Isa chosen() { return std::min(best_supported(), isa_cap()); }

}  // namespace

// A throwing initialiser leaves the static unset, so every later call reports the error again.
const KernelTable& kernels() {
  static const KernelTable& table = []() -> const KernelTable& {
    switch (chosen()) {
      case Isa::kAvx512Fp16:
        return avx512fp16_kernels();
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
std::string_view kernel_isa() { return detail::kernels().isa; }
}  // namespace cumulus
