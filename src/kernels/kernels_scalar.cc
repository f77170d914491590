// The kernels compiled for the scalar instruction set (see impl.inc and CMakeLists.txt).
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/kernels.h"

#define CUMULUS_KERNEL_ISA 0

namespace cumulus::detail {
namespace {
#include "kernels/impl.inc"
}  // namespace

const KernelTable& scalar_kernels() noexcept {
  static const KernelTable table = make_table("scalar");
  return table;
}

}  // namespace cumulus::detail
