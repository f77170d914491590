// cumulus: the ONNX accumulation operators over tensor views.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "cumulus/dtype.h"
#include "cumulus/tensor.h"

namespace cumulus {

enum class OpKind { kCumSum, kCumProd, kSum };
constexpr std::string_view op_name(OpKind op) noexcept {
  switch (op) {
    case OpKind::kCumSum:
      return "CumSum";
    case OpKind::kCumProd:
      return "CumProd";
    case OpKind::kSum:
      break;
  }
  return "Sum";
}

struct ScanOptions {
  bool exclusive = false;
  bool reverse = false;
};

// y[..., j, ...] = x[..., 0, ...] + ... + x[..., j, ...] along `axis` (in [-rank, rank - 1]);
// exclusive leaves out x[j], reverse runs from the end. y must have x's dtype and shape and may be
// x itself (in place), but must not partly overlap it. Every element type is accepted. Integers
// wrap around. A floating CumSum output is the exact sum of its terms rounded once to nearest even
// (the same bits for every instruction set, thread count and cut of the row); a floating CumProd
// output is within 1 ulp of the exact product, evaluated in one fixed order (README, "Numerical
// promises").
void cumsum(ConstTensorView x, int64_t axis, TensorView y, ScanOptions options = {});
void cumprod(ConstTensorView x, int64_t axis, TensorView y, ScanOptions options = {});
Tensor cumsum(ConstTensorView x, int64_t axis, ScanOptions options = {});
Tensor cumprod(ConstTensorView x, int64_t axis, ScanOptions options = {});

// The axis input of CumSum/CumProd as ONNX passes it: a 0-D int32 or int64 tensor (a one-element
// 1-D tensor is accepted too, as older exporters write one).
int64_t scan_axis(OpKind op, ConstTensorView axis);
// The element types scan_axis takes; the ONNX front end checks a model's declared types by it.
constexpr bool is_axis_dtype(DType t) noexcept { return t == DType::kInt32 || t == DType::kInt64; }

struct SumOptions {
  // Multidirectional (NumPy-style) broadcasting, as Sum-8 and later do; Sum-1 and Sum-6 need equal
  // shapes.
  bool broadcast = true;
};

// Shape of the sum of `inputs` (at least one, all of one floating dtype).
Shape sum_shape(std::span<const ConstTensorView> inputs, SumOptions options = {});
// y = inputs[0] + inputs[1] + ...: each output the exact sum of its terms rounded once to nearest
// even. y may be one of the inputs if it has the output's shape.
void sum(std::span<const ConstTensorView> inputs, TensorView y, SumOptions options = {});
Tensor sum(std::span<const ConstTensorView> inputs, SumOptions options = {});

// The instruction set of the kernels in use ("scalar", "avx2" or "avx512"): the best this CPU
// has, or lower if the environment variable CUMULUS_ISA (scalar, avx2 or avx512; unset or empty:
// no cap) asks for it. Any other CUMULUS_ISA is reported (kInvalidArgument) by this and by every
// operator call that reaches the kernels.
std::string_view kernel_isa();

// Threads the kernels may use (default: the hardware's). Results do not depend on it. A process
// forked from one whose threads had started makes its own, as many, at its first call.
void set_num_threads(int n);
int num_threads() noexcept;

}  // namespace cumulus
