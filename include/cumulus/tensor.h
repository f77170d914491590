// cumulus: tensor views over caller-owned buffers, and an owning tensor.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cumulus/dtype.h"
#include "cumulus/error.h"

namespace cumulus {

using Shape = std::vector<int64_t>;

// Number of elements of a shape; throws (ErrorCode::kLimit / kInvalidArgument) on a negative
// dimension or a count that does not fit in int64.
int64_t element_count(std::span<const int64_t> shape);
// "[2, 3]"; "[]" for a scalar.
std::string shape_string(std::span<const int64_t> shape);

// The largest buffer, in bytes, that the library allocates for one tensor (and the largest file
// the front end reads). A larger request fails with ErrorCode::kLimit, naming the size it would
// need, before anything is allocated. Default: the environment variable CUMULUS_MEMORY_LIMIT
// (bytes, or with a K, M, G or T suffix in powers of 1024) when set, otherwise the memory this
// machine can hold (physical memory, or the control group's limit when lower). A malformed
// CUMULUS_MEMORY_LIMIT is reported (kInvalidArgument) by the first call that needs the limit.
void set_memory_limit(std::size_t bytes);
std::size_t memory_limit();
// Throws kLimit when `bytes` exceed memory_limit(); `what` says what they are for.
void check_memory_limit(std::size_t bytes, std::string_view what);

// A dense, row-major (C order) tensor in memory the caller owns. The shape span must outlive
// the view.
struct TensorView {
  DType dtype;
  std::span<const int64_t> shape;
  void* data;
};
struct ConstTensorView {
  DType dtype;
  std::span<const int64_t> shape;
  const void* data;

  ConstTensorView(DType t, std::span<const int64_t> s, const void* d)
      : dtype(t), shape(s), data(d) {}
  ConstTensorView(TensorView v) : dtype(v.dtype), shape(v.shape), data(v.data) {}  // NOLINT
};

namespace detail {
// Returns a tensor's buffer to the library's allocator, which needs its capacity.
struct AlignedFree {
  std::size_t capacity = 0;
  void operator()(std::byte* p) const noexcept;
};
[[noreturn]] void raise_value_count(int64_t expected, std::size_t got);
}  // namespace detail

// Owns a 64-byte aligned buffer. Move-only; clone() copies.
class Tensor {
 public:
  Tensor() = default;
  // Uninitialised contents.
  Tensor(DType dtype, Shape shape);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  static Tensor zeros(DType dtype, Shape shape);
  template <class T>
  static Tensor from_values(Shape shape, std::span<const T> values);
  template <class T>
  static Tensor scalar(T value) {
    Tensor t(dtype_of<T>, {});
    *t.data<T>() = value;
    return t;
  }
  Tensor clone() const;

  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  int64_t rank() const noexcept { return static_cast<int64_t>(shape_.size()); }
  int64_t size() const noexcept { return size_; }
  std::size_t nbytes() const noexcept {
    return static_cast<std::size_t>(size_) * dtype_size(dtype_);
  }

  void* raw() noexcept { return data_.get(); }
  const void* raw() const noexcept { return data_.get(); }
  template <class T>
  T* data() noexcept {
    return reinterpret_cast<T*>(data_.get());
  }
  template <class T>
  const T* data() const noexcept {
    return reinterpret_cast<const T*>(data_.get());
  }
  template <class T>
  std::span<const T> values() const noexcept {
    return {data<T>(), static_cast<std::size_t>(size_)};
  }

  TensorView view() noexcept { return {dtype_, shape_, data_.get()}; }
  ConstTensorView view() const noexcept { return {dtype_, shape_, data_.get()}; }
  operator ConstTensorView() const noexcept { return view(); }  // NOLINT

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  int64_t size_ = 0;
  std::unique_ptr<std::byte[], detail::AlignedFree> data_;
};

template <class T>
Tensor Tensor::from_values(Shape shape, std::span<const T> values) {
  Tensor t(dtype_of<T>, std::move(shape));
  if (static_cast<std::size_t>(t.size()) != values.size()) {
    detail::raise_value_count(t.size(), values.size());
  }
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

}  // namespace cumulus
