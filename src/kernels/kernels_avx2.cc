// The kernels for the avx2 instruction set; CMakeLists.txt gives this file its flags.
#define CUMULUS_KERNEL_ISA 2
#define CUMULUS_KERNEL_TABLE avx2_kernels
#define CUMULUS_KERNEL_NAME "avx2"
#include "kernels/table.inc"
