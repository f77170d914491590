// The kernels for the avx512 instruction set; CMakeLists.txt gives this file its flags.
#include "kernels/isa.h"
#define CUMULUS_KERNEL_ISA CUMULUS_ISA_AVX512
#define CUMULUS_KERNEL_TABLE avx512_kernels
#define CUMULUS_KERNEL_NAME "avx512"
#include "kernels/table.inc"
