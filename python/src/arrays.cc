#include "arrays.h"

#include <dlpack/dlpack.h>
#include <fmt/format.h>
#include <pybind11/numpy.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <memory>
#include <string>

#include "errors.h"

namespace cumulus::python {
namespace {

constexpr bool kLittleEndian = std::endian::native == std::endian::little;

std::string supported_list() {
  std::string names;
  for (DType t : kAllDTypes) {
    if (!names.empty()) names += ", ";
    names += dtype_name(t);
  }
  return names;
}

[[noreturn]] void raise_unsupported_type(std::string_view op, std::string_view name,
                                         std::string_view type) {
  raise_type_error(
      fmt::format("{}: input '{}' has type {}, which cumulus does not support "
                  "(supported: {})",
                  op, name, type, supported_list()));
}

py::module_& numpy() {
  static py::module_* module = new py::module_(py::module_::import("numpy"));  // never freed
  return *module;
}

// ---- NumPy ----------------------------------------------------------------------------------

std::optional<DType> dtype_of_numpy(const py::detail::PyArrayDescr_Proxy* d, py::handle descr) {
  // The code ("f4"), formatted without allocating: every input needs it.
  char text[16] = {d->kind};
  const std::string_view code(text, std::to_chars(text + 1, text + sizeof text, d->elsize).ptr);
  for (DType t : kAllDTypes) {
    if (dtype_info(t).npy_code == code) return t;
  }
  // ml_dtypes registers bfloat16 with NumPy as a user type.
  if (d->elsize == 2 && py::str(descr.attr("name")).cast<std::string>() == "bfloat16") {
    return DType::kBFloat16;
  }
  return std::nullopt;
}

Operand from_numpy(py::handle array, std::string_view op, std::string_view name) {
  using Api = py::detail::npy_api;
  const auto* a = py::detail::array_proxy(array.ptr());
  const py::handle descr(a->descr);
  const auto* d = py::detail::array_descriptor_proxy(a->descr);
  const std::optional<DType> dtype = dtype_of_numpy(d, descr);
  if (!dtype) raise_unsupported_type(op, name, py::str(descr).cast<std::string>());
  Operand o;
  o.dtype = *dtype;
  o.kind = Kind::kNumpy;
  static_assert(sizeof(*a->dimensions) == sizeof(int64_t));
  o.shape.assign(reinterpret_cast<const int64_t*>(a->dimensions),
                 reinterpret_cast<const int64_t*>(a->dimensions) + a->nd);
  o.strides.assign(reinterpret_cast<const int64_t*>(a->strides),
                   reinterpret_cast<const int64_t*>(a->strides) + a->nd);
  o.data = reinterpret_cast<std::byte*>(a->data);
  o.swapped = d->elsize > 1 && d->byteorder == (kLittleEndian ? '>' : '<');
  const bool c_order = (a->flags & Api::NPY_ARRAY_C_CONTIGUOUS_) != 0;
  const bool aligned = (a->flags & Api::NPY_ARRAY_ALIGNED_) != 0;
  o.dense = c_order && aligned && !o.swapped;
  o.writeable = (a->flags & Api::NPY_ARRAY_WRITEABLE_) != 0;
  o.keep = py::reinterpret_borrow<py::object>(array);
  o.numpy_dtype =
      o.swapped ? descr.attr("newbyteorder")("=") : py::reinterpret_borrow<py::object>(descr);
  return o;
}

// ---- DLPack ---------------------------------------------------------------------------------

std::optional<DType> dtype_of_dlpack(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  for (DType d : kAllDTypes) {
    if (dtype_info(d).dlpack_code == t.code && dtype_info(d).dlpack_bits == t.bits) return d;
  }
  return std::nullopt;
}

std::string dlpack_type_name(DLDataType t) {
  const char* kinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex"};
  std::string name = t.code < 6 ? kinds[t.code] : fmt::format("code{}_", t.code);
  name += std::to_string(t.bits);
  if (t.lanes != 1) name += fmt::format("x{}", t.lanes);
  return name;
}

DLDataType dlpack_type(DType t) {
  return {dtype_info(t).dlpack_code, dtype_info(t).dlpack_bits, 1};
}

// torch.Tensor once torch is imported; cumulus never imports it itself.
bool is_torch_tensor(py::handle object) {
  static PyObject* tensor_type = nullptr;  // never freed
  if (tensor_type == nullptr) {
    py::object modules = py::module_::import("sys").attr("modules");
    py::object torch = modules.attr("get")("torch");
    if (torch.is_none()) return false;
    tensor_type = py::object(torch.attr("Tensor")).release().ptr();
  }
  const int is = PyObject_IsInstance(object.ptr(), tensor_type);
  if (is < 0) throw py::error_already_set();
  return is == 1;
}

bool c_order(const Operand& o) {
  int64_t expected = static_cast<int64_t>(dtype_size(o.dtype));
  for (std::size_t i = o.shape.size(); i-- > 0;) {
    if (o.shape[i] != 1 && o.strides[i] != expected) return false;
    expected *= o.shape[i];
  }
  return true;
}

std::string type_name(py::handle object) {
  return py::str(py::type::handle_of(object).attr("__name__")).cast<std::string>();
}

Operand from_dlpack(py::handle object, std::string_view op, std::string_view name) {
  py::object capsule;
  try {
    capsule = object.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    raise_type_error_from(e, fmt::format("{}: input '{}' ({}) cannot be read through DLPack", op,
                                         name, type_name(object)));
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    raise_type_error(fmt::format("{}: input '{}' ({}): __dlpack__ did not return a DLPack capsule",
                                 op, name, type_name(object)));
  }
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    raise_type_error(fmt::format(
        "{}: input '{}' ({}) is on DLPack device type {} (id {}); "
        "cumulus runs on the CPU",
        op, name, type_name(object), static_cast<int>(t.device.device_type), t.device.device_id));
  }
  const std::optional<DType> dtype = dtype_of_dlpack(t.dtype);
  if (!dtype) raise_unsupported_type(op, name, dlpack_type_name(t.dtype));
  Operand o;
  o.dtype = *dtype;
  o.kind = is_torch_tensor(object) ? Kind::kTorch : Kind::kDLPack;
  o.shape.assign(t.shape, t.shape + t.ndim);
  const auto item = static_cast<int64_t>(dtype_size(o.dtype));
  o.strides.resize(o.shape.size());
  int64_t stride = item;
  for (std::size_t i = o.shape.size(); i-- > 0;) {
    o.strides[i] = t.strides != nullptr ? t.strides[i] * item : stride;
    stride *= o.shape[i];
  }
  o.data = static_cast<std::byte*>(t.data) + t.byte_offset;
  const bool aligned =
      reinterpret_cast<std::uintptr_t>(o.data) % static_cast<std::size_t>(item) == 0;
  o.dense = aligned && c_order(o);
  // Not consumed: the producer's capsule destructor releases the tensor when `keep` goes.
  o.keep = std::move(capsule);
  return o;
}

// A tensor handed to a DLPack consumer: the consumer calls the deleter when it is done.
struct Exported {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};

py::capsule export_dlpack(Tensor&& tensor) {
  auto owned = std::make_unique<Exported>();
  Exported& e = *owned;
  e.tensor = std::move(tensor);
  e.shape = e.tensor.shape();
  e.strides.resize(e.shape.size());
  int64_t stride = 1;
  for (std::size_t i = e.shape.size(); i-- > 0;) {
    e.strides[i] = stride;  // some consumers (PyTorch 1.13) want strides spelled out
    stride *= e.shape[i];
  }
  e.managed.dl_tensor = {e.tensor.raw(),
                         DLDevice{kDLCPU, 0},
                         static_cast<int>(e.shape.size()),
                         dlpack_type(e.tensor.dtype()),
                         e.shape.data(),
                         e.strides.data(),
                         0};
  e.managed.manager_ctx = &e;
  e.managed.deleter = [](DLManagedTensor* m) { delete static_cast<Exported*>(m->manager_ctx); };
  PyObject* capsule = PyCapsule_New(&e.managed, "dltensor", [](PyObject* c) {
    // Still named "dltensor": no consumer took it, so it is ours to free.
    if (PyCapsule_IsValid(c, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
      m->deleter(m);
    }
  });
  if (capsule == nullptr) throw py::error_already_set();
  owned.release();
  return py::reinterpret_steal<py::capsule>(capsule);
}

// Hands a result to DLPack consumers that want an object with __dlpack__, such as
// numpy.from_dlpack and the array API's from_dlpack.
class DLPackResult {
 public:
  explicit DLPackResult(Tensor&& t) : tensor_(std::move(t)) {}
  py::capsule dlpack(const py::object& /*stream*/) {
    if (taken_) raise_value_error("cumulus: this result was already taken through DLPack");
    taken_ = true;
    return export_dlpack(std::move(tensor_));
  }

 private:
  Tensor tensor_;
  bool taken_ = false;
};

// ---- Copies ---------------------------------------------------------------------------------

template <class U>
U byte_swapped(U v) {
  if constexpr (sizeof(U) == 2) {
    return __builtin_bswap16(v);
  } else if constexpr (sizeof(U) == 4) {
    return __builtin_bswap32(v);
  } else {
    return __builtin_bswap64(v);
  }
}

template <class U, bool kSwap>
void copy_row(const std::byte* src, int64_t src_stride, std::byte* dst, int64_t dst_stride,
              int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    U v;
    std::memcpy(&v, src + i * src_stride, sizeof v);
    if constexpr (kSwap) v = byte_swapped(v);
    std::memcpy(dst + i * dst_stride, &v, sizeof v);
  }
}

using RowCopy = void (*)(const std::byte*, int64_t, std::byte*, int64_t, int64_t);

template <bool kSwap>
RowCopy row_copy(std::size_t item) {
  switch (item) {
    case 2:
      return copy_row<uint16_t, kSwap>;
    case 4:
      return copy_row<uint32_t, kSwap>;
    default:
      return copy_row<uint64_t, kSwap>;
  }
}

// Copies every element of `shape` between two strided layouts, swapping bytes if asked.
void copy_elements(std::span<const int64_t> shape, const std::byte* src,
                   std::span<const int64_t> src_strides, std::byte* dst,
                   std::span<const int64_t> dst_strides, std::size_t item, bool swap) {
  const RowCopy copy = swap ? row_copy<true>(item) : row_copy<false>(item);
  if (shape.empty()) {
    copy(src, 0, dst, 0, 1);
    return;
  }
  const std::size_t last = shape.size() - 1;
  std::vector<int64_t> index(last, 0);
  for (;;) {
    copy(src, src_strides[last], dst, dst_strides[last], shape[last]);
    std::size_t d = last;
    for (; d-- > 0;) {
      src += src_strides[d];
      dst += dst_strides[d];
      if (++index[d] < shape[d]) break;
      src -= src_strides[d] * shape[d];
      dst -= dst_strides[d] * shape[d];
      index[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

std::vector<int64_t> c_strides(std::span<const int64_t> shape, std::size_t item) {
  std::vector<int64_t> strides(shape.size());
  auto stride = static_cast<int64_t>(item);
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

py::object numpy_dtype(DType t) {
  if (t == DType::kBFloat16) {
    try {
      return py::module_::import("ml_dtypes").attr("bfloat16");
    } catch (py::error_already_set&) {
      raise_type_error(
          "cumulus: NumPy has no bfloat16 type for this result; install ml_dtypes, or pass "
          "torch tensors (or out=)");
    }
  }
  return numpy().attr("dtype")(std::string(dtype_name(t)));
}

py::object to_numpy(Tensor&& result, const Operand* like) {
  py::object dtype = like != nullptr && like->kind == Kind::kNumpy ? like->numpy_dtype
                                                                   : numpy_dtype(result.dtype());
  const Shape& shape = result.shape();
  if (result.raw() == nullptr) return numpy().attr("empty")(py::tuple(py::cast(shape)), dtype);
  auto* owned = new Tensor(std::move(result));
  py::capsule base(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(py::reinterpret_borrow<py::dtype>(dtype), owned->shape(), {}, owned->raw(),
                   base);
}

}  // namespace

int64_t Operand::count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Operand input_operand(py::handle object, std::string_view op, std::string_view name) {
  if (py::isinstance<py::array>(object)) {
    Operand o = from_numpy(object, op, name);
    o.object = py::reinterpret_borrow<py::object>(object);
    return o;
  }
  if (py::hasattr(object, "__dlpack__")) {
    Operand o = from_dlpack(object, op, name);
    o.object = py::reinterpret_borrow<py::object>(object);
    return o;
  }
  py::object array;
  try {
    array = numpy().attr("asarray")(object);
  } catch (py::error_already_set& e) {
    raise_type_error_from(
        e, fmt::format("{}: input '{}' ({}) is not an array", op, name, type_name(object)));
  }
  Operand o = from_numpy(array, op, name);
  o.object = std::move(array);
  return o;
}

Operand output_operand(py::handle object, std::string_view op) {
  if (!py::isinstance<py::array>(object) && !py::hasattr(object, "__dlpack__")) {
    raise_type_error(fmt::format(
        "{}: out must be a NumPy array or an object with __dlpack__ (such as a torch tensor), "
        "not {}",
        op, type_name(object)));
  }
  return input_operand(object, op, "out");
}

void check_out(const Operand& out, std::string_view op, DType dtype,
               std::span<const int64_t> shape) {
  if (out.dtype != dtype) {
    raise_type_error(
        fmt::format("{}: out has type {} but the result has type {}; cumulus does "
                    "not cast",
                    op, dtype_name(out.dtype), dtype_name(dtype)));
  }
  const std::span<const int64_t> out_shape = out.shape;
  if (!std::ranges::equal(out_shape, shape)) {
    raise_value_error(fmt::format("{}: out has shape {} but the result has shape {}", op,
                                  shape_string(out_shape), shape_string(shape)));
  }
  if (!out.writeable) raise_value_error(fmt::format("{}: out is read-only", op));
}

bool overlaps(const Operand& a, const Operand& b) {
  const auto extent = [](const Operand& o) {
    auto lo = reinterpret_cast<std::intptr_t>(o.data), hi = lo;
    for (std::size_t i = 0; i < o.shape.size(); ++i) {
      const int64_t span = o.strides[i] * (o.shape[i] - 1);
      (span < 0 ? lo : hi) += span;
    }
    return std::pair{lo, hi + static_cast<std::intptr_t>(dtype_size(o.dtype))};
  };
  if (a.count() == 0 || b.count() == 0) return false;
  const auto [a_lo, a_hi] = extent(a);
  const auto [b_lo, b_hi] = extent(b);
  return a_lo < b_hi && b_lo < a_hi;
}

py::object numpy_result(const Operand& like, std::span<const int64_t> shape) {
  int64_t count = 1;
  bool overflow = false;
  for (const int64_t d : shape) overflow |= __builtin_mul_overflow(count, d, &count);
  std::size_t bytes = 0;
  overflow |=
      __builtin_mul_overflow(static_cast<std::size_t>(count), dtype_size(like.dtype), &bytes);
  // Beyond the limit (or 64 bits), a tensor of the shape raises the library's own error.
  if (overflow || bytes > memory_limit()) Tensor(like.dtype, Shape(shape.begin(), shape.end()));
  static_assert(sizeof(Py_intptr_t) == sizeof(int64_t));
  auto& api = py::detail::npy_api::get();
  PyObject* array = api.PyArray_NewFromDescr_(
      api.PyArray_Type_, like.numpy_dtype.inc_ref().ptr(), static_cast<int>(shape.size()),
      const_cast<Py_intptr_t*>(reinterpret_cast<const Py_intptr_t*>(shape.data())), nullptr,
      nullptr, 0, nullptr);
  if (array == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(array);
}

std::byte* numpy_data(py::handle array) {
  return reinterpret_cast<std::byte*>(py::detail::array_proxy(array.ptr())->data);
}

Tensor dense_copy(const Operand& in, std::span<const int64_t> shape) {
  Tensor t(in.dtype, Shape(shape.begin(), shape.end()));
  if (t.size() == 0) return t;
  const std::size_t item = dtype_size(in.dtype);
  copy_elements(in.shape, in.data, in.strides, static_cast<std::byte*>(t.raw()),
                c_strides(in.shape, item), item, in.swapped);
  return t;
}

void scatter(ConstTensorView from, const Operand& to) {
  const std::size_t item = dtype_size(from.dtype);
  if (to.count() == 0) return;
  copy_elements(to.shape, static_cast<const std::byte*>(from.data), c_strides(to.shape, item),
                to.data, to.strides, item, to.swapped);
}

py::object wrap(Tensor&& result, Kind kind, const Operand* like) {
  switch (kind) {
    case Kind::kNumpy:
      break;
    case Kind::kTorch: {
      static PyObject* from_dlpack = nullptr;  // never freed
      if (from_dlpack == nullptr) {
        from_dlpack = py::object(py::module_::import("torch.utils.dlpack").attr("from_dlpack"))
                          .release()
                          .ptr();
      }
      return py::handle(from_dlpack)(export_dlpack(std::move(result)));
    }
    case Kind::kDLPack:
      if (like != nullptr && py::hasattr(like->object, "__array_namespace__")) {
        py::object space = like->object.attr("__array_namespace__")();
        return space.attr("from_dlpack")(py::cast(DLPackResult(std::move(result))));
      }
      break;
  }
  return to_numpy(std::move(result), like);
}

void add_array_types(py::module_& m) {
  py::class_<DLPackResult>(m, "_DLPackResult")
      .def("__dlpack__", &DLPackResult::dlpack, py::arg("stream") = py::none())
      .def("__dlpack_device__", [](const DLPackResult&) { return py::make_tuple(1, 0); });
}

}  // namespace cumulus::python
