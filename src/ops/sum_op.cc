// Sum: broadcasting as stride 0, adjacent dimensions coalesced, then one pass of the row kernel
// over every operand.
#include <algorithm>
#include <charconv>
#include <vector>

#include "core/fail.h"
#include "core/float_env.h"
#include "core/parallel.h"
#include "kernels/kernels.h"
#include "ops/checks.h"
#include "ops/sum_same_shape.h"
#include "ops/tuning.h"

namespace cumulus {

void detail::fail_sum_type_mismatch(std::string_view op, std::size_t k, std::string_view type,
                                    std::string_view first_type, std::string_view where) {
  fail(ErrorCode::kInvalidArgument,
       "{}: input 'data_{}' has type {} but input 'data_0' has type {}; all inputs must have one "
       "type{}",
       op, k, type, first_type, where);
}

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

// `size` elements, zeroed: in place up to kInline, on the heap beyond. Most calls have few
// inputs of low rank, and these buffers then cost no allocation.
template <class T, std::size_t kInline>
class Buffer {
 public:
  explicit Buffer(std::size_t size) : size_(size) {
    if (size > kInline) {
      heap_.resize(size);
    } else {
      std::fill_n(inline_, size, T{});  // only those in use: small calls would pay for all
    }
  }
  std::size_t size() const { return size_; }
  T* data() { return size_ > kInline ? heap_.data() : inline_; }
  const T* data() const { return size_ > kInline ? heap_.data() : inline_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }

 private:
  T inline_[kInline];
  std::vector<T> heap_;
  std::size_t size_;
};

// The loop nest after broadcasting and coalescing: dims[d] for d < rank, and the element stride
// of input k along dimension d at strides[d * inputs + k] (0 where the input is broadcast).
struct SumPlan {
  // A constructor: GCC compiles aggregate initialisation of the plan to zeroing all of it first.
  SumPlan(std::size_t n, std::size_t most) : inputs(n), dims(most), strides(most * n) {}
  std::size_t inputs, rank = 0;
  Buffer<std::size_t, 8> dims;
  Buffer<std::size_t, 32> strides;
  std::size_t stride(std::size_t d, std::size_t k) const { return strides[d * inputs + k]; }
};

SumPlan plan_sum(std::span<const ConstTensorView> inputs, std::span<const int64_t> out) {
  const std::size_t n = inputs.size(), rank = out.size();
  Buffer<std::size_t, 32> full(rank * n);
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
  // A scalar result keeps one dimension of 1, its strides 0.
  const std::size_t most = std::max<std::size_t>(rank, 1);
  SumPlan plan(n, most);
  for (std::size_t d = 0; d < rank; ++d) {
    const auto dim = static_cast<std::size_t>(out[d]);
    if (dim == 1) continue;
    const std::size_t* next = &full[d * n];
    bool merge = plan.rank > 0;
    for (std::size_t k = 0; merge && k < n; ++k)
      merge = plan.stride(plan.rank - 1, k) == next[k] * dim;
    if (merge) {
      plan.dims[plan.rank - 1] *= dim;
    } else {
      plan.dims[plan.rank++] = dim;
    }
    std::copy(next, next + n, &plan.strides[(plan.rank - 1) * n]);
  }
  if (plan.rank == 0) plan.dims[plan.rank++] = 1;
  return plan;
}

// The broadcast shape: the last `rank` of `dims`, which has room for the largest input rank.
struct Broadcast {
  Buffer<int64_t, 8> dims;
  std::size_t rank;
  std::span<const int64_t> shape() const { return {dims.data() + dims.size() - rank, rank}; }
};

Broadcast broadcast(std::span<const ConstTensorView> inputs, SumOptions options) {
  if (inputs.empty()) detail::fail(ErrorCode::kInvalidArgument, "Sum: needs at least one input");
  const DType dtype = inputs[0].dtype;
  std::size_t most = 0;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].dtype != dtype) {
      detail::fail_sum_type_mismatch("Sum", k, dtype_name(inputs[k].dtype), dtype_name(dtype));
    }
    element_count(inputs[k].shape);
    most = std::max(most, inputs[k].shape.size());
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

  // Leading dimensions wait as 1 until an input of that rank arrives.
  Broadcast b{Buffer<int64_t, 8>(most), inputs[0].shape.size()};
  std::fill_n(b.dims.data(), most, 1);
  std::ranges::copy(inputs[0].shape, b.dims.data() + most - b.rank);
  for (std::size_t k = 1; k < inputs.size(); ++k) {
    const auto& shape = inputs[k].shape;
    if (!options.broadcast) {
      if (!std::ranges::equal(shape, b.shape())) {
        detail::fail(ErrorCode::kInvalidArgument,
                     "Sum: input '{}' has shape {} but input 'data_0' has shape {}; Sum-1 and "
                     "Sum-6 do not broadcast (Sum-8 and later do)",
                     input_name(k).view(), shape_string(shape), shape_string(b.shape()));
      }
      continue;
    }
    b.rank = std::max(b.rank, shape.size());
    int64_t* out = b.dims.data() + most;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      int64_t& o = out[-1 - static_cast<std::ptrdiff_t>(i)];
      const int64_t d = shape[shape.size() - 1 - i];
      if (d == o || d == 1) continue;
      if (o != 1) {
        detail::fail(ErrorCode::kInvalidArgument,
                     "Sum: input '{}' of shape {} cannot be broadcast with shape {} of the inputs "
                     "before it (dimension {} from the end: {} vs {})",
                     input_name(k).view(), shape_string(shape), shape_string(b.shape()), i + 1, d,
                     o);
      }
      o = d;
    }
  }
  return b;
}

// The loop nest of `plan` over tiles of its innermost dimension, on the pool's threads: y's
// `count` elements (at least one), the checks done.
void run_sum(std::span<const ConstTensorView> inputs, TensorView y, std::size_t count,
             const SumPlan& plan, std::size_t out_bytes) {
  const detail::DefaultFloatEnvironment environment;
  const detail::Tuning tuning = detail::tuning();
  const std::size_t row_tile = tuning.sum_row_tile;
  const std::size_t rank = plan.rank;
  const std::size_t inner = plan.dims[rank - 1];
  const std::size_t rows = count / inner;
  const std::size_t tiles = (inner + row_tile - 1) / row_tile;
  const std::size_t item = dtype_size(y.dtype);
  Buffer<unsigned char, 16> steps(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) steps[k] = plan.stride(rank - 1, k) == 0 ? 0 : 1;
  const detail::SumKernel kernel = tuning.kernel_table().sum[static_cast<int>(y.dtype)];
  const bool stream = out_bytes >= tuning.stream_bytes;

  const std::size_t grain =
      std::max<std::size_t>(1, tuning.min_chunk_elements / std::min(inner, row_tile));
  detail::parallel_for(rows * tiles, grain, [&](std::size_t begin, std::size_t end) {
    Buffer<const void*, 16> operands(inputs.size());
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

}  // namespace

Shape sum_shape(std::span<const ConstTensorView> inputs, SumOptions options) {
  const Broadcast b = broadcast(inputs, options);
  return Shape(b.shape().begin(), b.shape().end());
}

void sum(std::span<const ConstTensorView> inputs, TensorView y, SumOptions options) {
  const Broadcast shape = broadcast(inputs, options);
  const std::span<const int64_t> out = shape.shape();
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
  run_sum(inputs, y, static_cast<std::size_t>(count), plan_sum(inputs, out), out_bytes);
}

void detail::sum_same_shape(std::span<const ConstTensorView> inputs, TensorView y) {
  std::size_t count = 1;
  for (const int64_t d : y.shape) count *= static_cast<std::size_t>(d);
  if (count == 0) return;
  // One dimension, which every input steps through.
  SumPlan plan(inputs.size(), 1);
  plan.rank = 1;
  plan.dims[0] = count;
  std::fill_n(plan.strides.data(), inputs.size(), 1);
  run_sum(inputs, y, count, plan, count * dtype_size(y.dtype));
}

Tensor sum(std::span<const ConstTensorView> inputs, SumOptions options) {
  Tensor y(inputs.empty() ? DType::kFloat32 : inputs[0].dtype, sum_shape(inputs, options));
  sum(inputs, y.view(), options);
  return y;
}

}  // namespace cumulus
