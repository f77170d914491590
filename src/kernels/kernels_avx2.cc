// The kernels compiled for the avx2 instruction set (see impl.inc and CMakeLists.txt).
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/kernels.h"

#define CUMULUS_KERNEL_ISA 2

namespace cumulus::detail {
namespace {
#include "kernels/impl.inc"
}  // namespace

const KernelTable& avx2_kernels() noexcept {
  static const KernelTable table = make_table("avx2");
  return table;
}

}  // namespace cumulus::detail
