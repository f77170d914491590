// The kernels for the scalar instruction set; CMakeLists.txt gives this file its flags.
#define CUMULUS_KERNEL_ISA 0
#define CUMULUS_KERNEL_TABLE scalar_kernels
#define CUMULUS_KERNEL_NAME "scalar"
#include "kernels/table.inc"
