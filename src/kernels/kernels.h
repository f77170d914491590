// Kernels: raw loops over pointers and counts. No allocation, no threads, no validation beyond
// what the ops layer has already done.
#pragma once

#include <cstddef>

#include "cumulus/dtype.h"

namespace cumulus::detail {

// Scans `outer` slabs of `length` x `inner` elements, laid out contiguously, along the length
// axis, for the columns [col_begin, col_end) of each slab. y may equal x.
struct ScanBlock {
  const void* x;
  void* y;
  std::size_t outer, length, inner, col_begin, col_end;
  bool exclusive, reverse;
};
using ScanKernel = void (*)(const ScanBlock& block) noexcept;

// y[j] = in[0][j * step[0]] + in[1][j * step[1]] + ... for j < count, left to right in the wide
// type; each step is 0 (a broadcast operand) or 1. y may equal an input with step 1.
struct SumRow {
  const void* const* inputs;
  const unsigned char* steps;
  std::size_t num_inputs;
  void* y;
  std::size_t count;
};
using SumKernel = void (*)(const SumRow& row) noexcept;

struct KernelTable {
  const char* isa;
  ScanKernel cumsum[kNumDTypes];
  ScanKernel cumprod[kNumDTypes];
  SumKernel sum[kNumDTypes];  // floating types only; others null
};

// Chosen once per process.
const KernelTable& kernels() noexcept;

// Per instruction set tables.
const KernelTable& scalar_kernels() noexcept;

}  // namespace cumulus::detail
