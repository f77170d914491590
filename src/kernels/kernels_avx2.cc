// The kernels for the avx2 instruction set; CMakeLists.txt gives this file its flags.
#include "kernels/isa.h"
#define CUMULUS_KERNEL_ISA CUMULUS_ISA_AVX2
#define CUMULUS_KERNEL_TABLE avx2_kernels
#define CUMULUS_KERNEL_NAME "avx2"
#include "kernels/table.inc"
