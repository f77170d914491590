// Python arrays to tensor views and back: NumPy arrays (any layout and byte order), objects
// with __dlpack__ (PyTorch tensors among them) and array-likes, and results of the input's kind.
#pragma once

#include <pybind11/pybind11.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "cumulus/tensor.h"

namespace cumulus::python {

namespace py = pybind11;

// What the caller passed, which decides what kind of array a result is.
enum class Kind : uint8_t { kNumpy, kTorch, kDLPack };

// Dimensions or strides: inline up to a rank of 8, so most calls allocate none.
class Dims {
 public:
  void assign(const int64_t* first, const int64_t* last) {
    resize(static_cast<std::size_t>(last - first));
    std::copy(first, last, data());
  }
  void resize(std::size_t n) {
    size_ = n;
    if (n > kInline) heap_.resize(n);
  }
  int64_t* data() { return size_ > kInline ? heap_.data() : inline_.data(); }
  const int64_t* data() const { return size_ > kInline ? heap_.data() : inline_.data(); }
  std::size_t size() const { return size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t& operator[](std::size_t i) { return data()[i]; }
  int64_t operator[](std::size_t i) const { return data()[i]; }
  operator std::span<const int64_t>() const { return {data(), size_}; }  // NOLINT

 private:
  static constexpr std::size_t kInline = 8;
  std::array<int64_t, kInline> inline_{};
  std::vector<int64_t> heap_;
  std::size_t size_ = 0;
};

// `size` copies of a value: in place up to kInline, on the heap beyond; for the per-input
// state of a call, as most calls have few inputs.
template <class T, std::size_t kInline>
class SmallArray {
 public:
  SmallArray(std::size_t size, const T& value) : size_(size) {
    if (size > kInline) {
      heap_.assign(size, value);
    } else {
      std::uninitialized_fill_n(inline_data(), size, value);
    }
  }
  SmallArray(const SmallArray&) = delete;
  SmallArray& operator=(const SmallArray&) = delete;
  ~SmallArray() {
    if (size_ <= kInline) std::destroy_n(inline_data(), size_);
  }
  std::size_t size() const { return size_; }
  T* begin() { return size_ > kInline ? heap_.data() : inline_data(); }
  T* end() { return begin() + size_; }
  T& operator[](std::size_t i) { return begin()[i]; }
  operator std::span<const T>() { return {begin(), size_}; }  // NOLINT

 private:
  T* inline_data() { return std::launder(reinterpret_cast<T*>(storage_)); }
  alignas(T) unsigned char storage_[kInline * sizeof(T)];
  std::vector<T> heap_;
  std::size_t size_;
};

// A strided array in memory that Python owns.
struct Operand {
  DType dtype = DType::kFloat32;
  Kind kind = Kind::kNumpy;
  Dims shape;
  Dims strides;               // in bytes; may be negative or zero
  std::byte* data = nullptr;  // the first element
  bool swapped = false;       // non-native byte order
  bool dense = false;         // C order, aligned and native: the kernels can read it as it is
  bool writeable = true;
  py::object keep;         // the array or DLPack capsule that holds the memory
  py::object numpy_dtype;  // NumPy operands: the dtype of a result (native byte order)
  py::object object;       // what the caller passed

  int64_t count() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(count()) * dtype_size(dtype); }
  ConstTensorView view() const { return {dtype, shape, data}; }
  TensorView mutable_view() { return {dtype, shape, data}; }
};

// `op` and `name` go into messages ("CumSum: input 'x' ..."). Array-likes go through
// numpy.asarray.
Operand input_operand(py::handle object, std::string_view op, std::string_view name);
// An out= argument: a NumPy array, or an object with __dlpack__; never converted.
Operand output_operand(py::handle object, std::string_view op);
// Raises unless `out` has `dtype` and `shape` (exactly: no casts, no broadcasting).
void check_out(const Operand& out, std::string_view op, DType dtype,
               std::span<const int64_t> shape);

// Whether the memory of two operands may share bytes (from their extents).
bool overlaps(const Operand& a, const Operand& b);

// The operand's elements in C order and native byte order, as a tensor of `shape` (of the same
// element count). Call without the GIL.
Tensor dense_copy(const Operand& in, std::span<const int64_t> shape);
// Writes C-ordered elements into the (strided) operand. Call without the GIL.
void scatter(ConstTensorView from, const Operand& to);

// A new C-ordered NumPy array of `shape` with the dtype of `like` (a NumPy operand), allocated by
// NumPy, so that a result needs no tensor to own it; the library's checks on a tensor's size (the
// memory limit, 64 bits) come first.
py::object numpy_result(const Operand& like, std::span<const int64_t> shape);
// The first element of a NumPy array.
std::byte* numpy_data(py::handle array);

// A result array of `kind`, owning the tensor's buffer (no copy). `like` gives the NumPy dtype
// of a NumPy result when it has one.
py::object wrap(Tensor&& result, Kind kind, const Operand* like);

// Runs scan(x, y) on `in` (seen with `shape`) and returns the result: written straight into `out`
// (an array or None) when writing it cannot change input not yet read, otherwise into a new
// tensor, then scattered into `out` or returned as the input's kind. The GIL is released around
// the scan; `op` names the operator in out='s errors.
template <class Scan>
py::object scan_into(const Operand& in, std::span<const int64_t> shape, const py::object& out,
                     std::string_view op, const Scan& scan) {
  std::optional<Operand> target;
  if (!out.is_none()) {
    target = output_operand(out, op);
    check_out(*target, op, in.dtype, shape);
  }
  const bool direct =
      target && target->dense && (!in.dense || target->data == in.data || !overlaps(in, *target));
  Tensor result;
  {
    py::gil_scoped_release release;
    Tensor copy;
    ConstTensorView xv{in.dtype, shape, in.data};
    if (!in.dense) {
      copy = dense_copy(in, shape);
      xv.data = copy.raw();
    }
    if (direct) {
      scan(xv, TensorView{in.dtype, shape, target->data});
    } else {
      // A copy of the input is scanned in place.
      Tensor y = in.dense ? Tensor(in.dtype, Shape(shape.begin(), shape.end())) : std::move(copy);
      scan(xv, y.view());
      if (target) {
        scatter(y.view(), *target);
      } else {
        result = std::move(y);
      }
    }
  }
  if (target) return out;
  return wrap(std::move(result), in.kind, &in);
}

// Registers the helper class that hands results to DLPack consumers.
void add_array_types(py::module_& m);

}  // namespace cumulus::python
