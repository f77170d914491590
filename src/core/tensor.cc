#include "cumulus/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "core/fail.h"
#include "core/memory.h"

namespace cumulus {

int64_t element_count(std::span<const int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0)
      detail::fail(ErrorCode::kInvalidArgument, "shape {} has a negative dimension",
                   shape_string(shape));
  }
  for (int64_t d : shape) {
    if (d == 0) return 0;
    if (count > std::numeric_limits<int64_t>::max() / d) {
      detail::fail(ErrorCode::kLimit, "shape {} has more elements than fit in 64 bits",
                   shape_string(shape));
    }
    count *= d;
  }
  return count;
}

std::string shape_string(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

namespace detail {

void AlignedFree::operator()(std::byte* p) const noexcept { release({p, capacity}); }

void raise_value_count(int64_t expected, std::size_t got) {
  fail(ErrorCode::kInvalidArgument, "tensor of {} elements given {} values", expected, got);
}

}  // namespace detail

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  size_ = element_count(shape_);
  const auto item = static_cast<int64_t>(dtype_size(dtype_));
  if (size_ > std::numeric_limits<int64_t>::max() / item) {
    detail::fail(ErrorCode::kLimit, "a {} tensor of shape {} needs more bytes than fit in 64 bits",
                 dtype_name(dtype_), shape_string(shape_));
  }
  // Always allocate, even for empty tensors, so data() is never null.
  const auto bytes = static_cast<std::size_t>(size_ * item);
  if (bytes > memory_limit()) {
    check_memory_limit(
        bytes, fmt::format("a {} tensor of shape {}", dtype_name(dtype_), shape_string(shape_)));
  }
  detail::Block block{};
  try {
    block = detail::allocate(bytes);
  } catch (const Error&) {
    detail::fail(ErrorCode::kLimit, "cannot allocate {} bytes for a {} tensor of shape {}", bytes,
                 dtype_name(dtype_), shape_string(shape_));
  }
  data_ = std::unique_ptr<std::byte[], detail::AlignedFree>(block.data, {block.capacity});
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes() != 0) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

}  // namespace cumulus
