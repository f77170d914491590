// The kernels for the avx512fp16 instruction set (AVX-512 with AVX512-FP16); CMakeLists.txt gives
// this file its flags.
#include "kernels/isa.h"
#define CUMULUS_KERNEL_ISA CUMULUS_ISA_AVX512FP16
#define CUMULUS_KERNEL_TABLE avx512fp16_kernels
#define CUMULUS_KERNEL_NAME "avx512fp16"
#include "kernels/table.inc"
