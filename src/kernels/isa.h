// The instruction-set levels the kernels are compiled for, as numbers the preprocessor can
// compare: each kernels_*.cc sets CUMULUS_KERNEL_ISA to one of them, and the kernel sources choose
// their sections with `#if CUMULUS_KERNEL_ISA >= CUMULUS_ISA_AVX2` and the like. Higher levels
// include the lower ones' instructions.
#pragma once

#define CUMULUS_ISA_SCALAR 0      // portable C++
#define CUMULUS_ISA_AVX2 2        // AVX2 + FMA + F16C
#define CUMULUS_ISA_AVX512 5      // AVX-512 F/VL/BW/DQ
#define CUMULUS_ISA_AVX512FP16 6  // AVX-512 as above + AVX512-FP16 (float16 conversions)
