// Sum: broadcasting as stride 0, adjacent dimensions coalesced, then one pass of the row kernel
// over every operand.
#include <algorithm>
#include <charconv>
#include <vector>

#include "core/fail.h"
#include "core/parallel.h"
#include "kernels/kernels.h"
#include "ops/checks.h"
#include "ops/tuning.h"

namespace cumulus {
namespace {

// "data_<k>", formatted without allocating: the checks name every input on every call.
struct InputName {
  char text[24];
  std::size_t size;
  std::string_view view() const { return {text, size}; }
};
InputName input_name(std::size_t k) {
  InputName name{{'d', 'a', 't', 'a', '_'}, 0};
  name.size = static_cast<std::size_t>(
      std::to_chars(name.text + 5, name.text + sizeof name.text, k).ptr - name.text);
  return name;
}

// The loop nest after broadcasting and coalescing: dims[d], and the element stride of input k
// along dimension d at strides[d * inputs + k] (0 where the input is broadcast).
struct SumPlan {
  std::size_t inputs = 0;
  std::vector<std::size_t> dims;
  std::vector<std::size_t> strides;
  std::size_t stride(std::size_t d, std::size_t k) const { return strides[d * inputs + k]; }
};

SumPlan plan_sum(std::span<const ConstTensorView> inputs, std::span<const int64_t> out) {
  const std::size_t n = inputs.size(), rank = out.size();
  std::vector<std::size_t> full(rank * n, 0);
  for (std::size_t k = 0; k < n; ++k) {
    const auto& shape = inputs[k].shape;
    std::size_t stride = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const std::size_t od = rank - 1 - i;
      const auto dim = static_cast<std::size_t>(shape[shape.size() - 1 - i]);
      full[od * n + k] = (dim == 1 && out[od] != 1) ? 0 : stride;
      stride *= dim;
    }
  }
  // Dimension d folds into the one before it when every input steps through both as one run.
  SumPlan plan{n, {}, {}};
  for (std::size_t d = 0; d < rank; ++d) {
    const auto dim = static_cast<std::size_t>(out[d]);
    if (dim == 1) continue;
    const std::size_t* next = &full[d * n];
    bool merge = !plan.dims.empty();
    for (std::size_t k = 0; merge && k < n; ++k)
      merge = plan.strides[plan.strides.size() - n + k] == next[k] * dim;
    if (merge) {
      plan.dims.back() *= dim;
      std::copy(next, next + n, plan.strides.end() - static_cast<std::ptrdiff_t>(n));
    } else {
      plan.dims.push_back(dim);
      plan.strides.insert(plan.strides.end(), next, next + n);
    }
  }
  if (plan.dims.empty()) {  // a scalar result
    plan.dims.push_back(1);
    plan.strides.assign(n, 0);
  }
  return plan;
}

// Holds the per-row operand pointers; inputs beyond the inline capacity go to the heap.
class RowOperands {
 public:
  explicit RowOperands(std::size_t n) {
    if (n > kInline) heap_.resize(n);
  }
  const void** data() { return heap_.empty() ? inline_ : heap_.data(); }

 private:
  static constexpr std::size_t kInline = 16;
  const void* inline_[kInline] = {};
  std::vector<const void*> heap_;
};

}  // namespace

Shape sum_shape(std::span<const ConstTensorView> inputs, SumOptions options) {
  if (inputs.empty()) detail::fail(ErrorCode::kInvalidArgument, "Sum: needs at least one input");
  const DType dtype = inputs[0].dtype;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].dtype != dtype) {
      detail::fail(ErrorCode::kInvalidArgument,
                   "Sum: input '{}' has type {} but input 'data_0' has type {}; all inputs must "
                   "have one type",
                   input_name(k).view(), dtype_name(inputs[k].dtype), dtype_name(dtype));
    }
    element_count(inputs[k].shape);
  }
  if (!is_floating(dtype)) {
    std::vector<std::string_view> floating;
    for (DType t : kAllDTypes) {
      if (is_floating(t)) floating.push_back(dtype_name(t));
    }
    std::ranges::sort(floating);
    detail::fail(ErrorCode::kInvalidArgument, "Sum: type {} is not supported (allowed: {})",
                 dtype_name(dtype), fmt::join(floating, ", "));
  }

  Shape out(inputs[0].shape.begin(), inputs[0].shape.end());
  for (std::size_t k = 1; k < inputs.size(); ++k) {
    const auto& shape = inputs[k].shape;
    if (!options.broadcast) {
      if (!std::ranges::equal(shape, out)) {
        detail::fail(ErrorCode::kInvalidArgument,
                     "Sum: input '{}' has shape {} but input 'data_0' has shape {}; Sum-1 and "
                     "Sum-6 do not broadcast (Sum-8 and later do)",
                     input_name(k).view(), shape_string(shape), shape_string(out));
      }
      continue;
    }
    if (shape.size() > out.size()) out.insert(out.begin(), shape.size() - out.size(), 1);
    for (std::size_t i = 0; i < shape.size(); ++i) {
      int64_t& o = out[out.size() - 1 - i];
      const int64_t d = shape[shape.size() - 1 - i];
      if (d == o || d == 1) continue;
      if (o != 1) {
        detail::fail(ErrorCode::kInvalidArgument,
                     "Sum: input '{}' of shape {} cannot be broadcast with shape {} of the inputs "
                     "before it (dimension {} from the end: {} vs {})",
                     input_name(k).view(), shape_string(shape), shape_string(out), i + 1, d, o);
      }
      o = d;
    }
  }
  return out;
}

void sum(std::span<const ConstTensorView> inputs, TensorView y, SumOptions options) {
  const Shape out = sum_shape(inputs, options);
  if (y.dtype != inputs[0].dtype) {
    detail::fail(ErrorCode::kInvalidArgument,
                 "Sum: output 'sum' has type {} but the inputs have type {}", dtype_name(y.dtype),
                 dtype_name(inputs[0].dtype));
  }
  if (!std::ranges::equal(y.shape, out)) {
    detail::fail(ErrorCode::kInvalidArgument,
                 "Sum: output 'sum' has shape {} but the inputs broadcast to {}",
                 shape_string(y.shape), shape_string(out));
  }
  const int64_t count = element_count(out);
  detail::check_data("Sum", "sum", y.data, count);
  const std::size_t out_bytes = detail::byte_size(y, count);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const int64_t n = element_count(inputs[k].shape);
    detail::check_data("Sum", input_name(k).view(), inputs[k].data, n);
    const std::size_t in_bytes = detail::byte_size(inputs[k], n);
    // In place only over an input that is not broadcast, element for element.
    if (y.data == inputs[k].data && n > 0 && !std::ranges::equal(inputs[k].shape, out)) {
      detail::fail(ErrorCode::kInvalidArgument,
                   "Sum: output 'sum' shares its buffer with input '{}', which is broadcast",
                   input_name(k).view());
    }
    detail::check_no_partial_overlap("Sum", "sum", y.data, out_bytes, input_name(k).view(),
                                     inputs[k].data, in_bytes);
  }
  if (count == 0) return;

  const detail::Tuning tuning = detail::tuning();
  const std::size_t row_tile = tuning.sum_row_tile;
  const SumPlan plan = plan_sum(inputs, out);
  const std::size_t rank = plan.dims.size();
  const std::size_t inner = plan.dims.back();
  const std::size_t rows = static_cast<std::size_t>(count) / inner;
  const std::size_t tiles = (inner + row_tile - 1) / row_tile;
  const std::size_t item = dtype_size(y.dtype);
  std::vector<unsigned char> steps(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) steps[k] = plan.stride(rank - 1, k) == 0 ? 0 : 1;
  const detail::SumKernel kernel = tuning.kernel_table().sum[static_cast<int>(y.dtype)];
  const bool stream = out_bytes >= tuning.stream_bytes;

  const std::size_t grain =
      std::max<std::size_t>(1, tuning.min_chunk_elements / std::min(inner, row_tile));
  detail::parallel_for(rows * tiles, grain, [&](std::size_t begin, std::size_t end) {
    RowOperands operands(inputs.size());
    const void** ptrs = operands.data();
    for (std::size_t task = begin; task < end; ++task) {
      const std::size_t row = task / tiles;
      const std::size_t col = (task % tiles) * row_tile;
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        std::size_t rest = row, offset = col * steps[k];
        for (std::size_t d = rank - 1; d-- > 0;) {
          offset += (rest % plan.dims[d]) * plan.stride(d, k);
          rest /= plan.dims[d];
        }
        ptrs[k] = static_cast<const std::byte*>(inputs[k].data) + offset * item;
      }
      kernel({ptrs, steps.data(), inputs.size(),
              static_cast<std::byte*>(y.data) + (row * inner + col) * item,
              std::min(row_tile, inner - col), stream});
    }
  });
}

Tensor sum(std::span<const ConstTensorView> inputs, SumOptions options) {
  Tensor y(inputs.empty() ? DType::kFloat32 : inputs[0].dtype, sum_shape(inputs, options));
  sum(inputs, y.view(), options);
  return y;
}

}  // namespace cumulus
