// The kernels for the scalar instruction set; CMakeLists.txt gives this file its flags.
#include "kernels/isa.h"
#define CUMULUS_KERNEL_ISA CUMULUS_ISA_SCALAR
#define CUMULUS_KERNEL_TABLE scalar_kernels
#define CUMULUS_KERNEL_NAME "scalar"
#include "kernels/table.inc"
