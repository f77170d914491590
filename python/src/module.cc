// cumulus._core: the operators and settings of cumulus for Python arrays.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "arguments.h"
#include "arrays.h"
#include "chunks.h"
#include "cumulus/ops.h"
#include "errors.h"
#include "onnx_model.h"
#include "ops/sum_same_shape.h"

namespace cumulus::python {
namespace {

void run_scan(OpKind op, ConstTensorView x, int64_t axis, TensorView y, ScanOptions options) {
  if (op == OpKind::kCumSum) {
    cumsum(x, axis, y, options);
  } else {
    cumprod(x, axis, y, options);
  }
}

py::object scan(OpKind op, const py::object& x, const py::object& axis, const py::object& exclusive,
                const py::object& reverse, const py::object& out) {
  const std::string_view name = op_name(op);
  const Operand in = input_operand(x, name, "x");
  const ScanOptions options{attribute(exclusive, name, "exclusive"),
                            attribute(reverse, name, "reverse")};
  // axis=None scans the flattened array, as numpy.cumsum does.
  const bool flat = axis.is_none();
  const int64_t a = flat ? 0 : integer(axis, name, "axis");
  const int64_t count = in.count();
  const std::span<const int64_t> shape = flat ? std::span(&count, 1) : in.shape;
  return scan_into(in, shape, out, name,
                   [&](ConstTensorView xv, TensorView yv) { run_scan(op, xv, a, yv, options); });
}

// ONNX's names of Sum's inputs; the first ones made once, as every call needs them.
std::string_view input_name(std::size_t k) {
  static const auto* names = [] {
    auto* made = new std::vector<std::string>;  // never freed
    for (int i = 0; i < 16; ++i) made->push_back(fmt::format("data_{}", i));
    return made;
  }();
  if (k < names->size()) return (*names)[k];
  thread_local std::string other;
  other = fmt::format("data_{}", k);
  return other;
}

// Below this many elements in all (inputs and result), the work takes less time than giving up
// and taking back the GIL would.
constexpr int64_t kKeepGilElements = 16 * 1024;

// The element count of `shape` (valid dimensions), or kKeepGilElements if that is less; never
// overflows.
int64_t capped_count(std::span<const int64_t> shape) {
  if (std::ranges::find(shape, 0) != shape.end()) return 0;
  int64_t n = 1;
  for (const int64_t d : shape) n = std::min(kKeepGilElements, n * std::min(d, kKeepGilElements));
  return n;
}

py::object sum_arrays(const py::args& arrays, const py::object& out) {
  SmallArray<Operand, 4> ins(arrays.size(), Operand{});
  for (std::size_t k = 0; k < ins.size(); ++k) {
    ins[k] = input_operand(arrays[k], "Sum", input_name(k));
  }
  const DType dtype = ins.size() > 0 ? ins[0].dtype : DType::kFloat32;
  SmallArray<ConstTensorView, 4> views(ins.size(), {dtype, {}, nullptr});
  // Types first, on scalar stand-ins (which always broadcast): what fails here is a type. Only
  // mixed or non-floating types can fail.
  if (std::ranges::any_of(ins, [&](const Operand& in) { return in.dtype != dtype; }) ||
      (ins.size() > 0 && !is_floating(dtype))) {
    for (std::size_t k = 0; k < ins.size(); ++k) views[k].dtype = ins[k].dtype;
    as_type_error([&] { sum_shape(views); });
  }
  int64_t elements = 0;
  for (std::size_t k = 0; k < ins.size(); ++k) {
    views[k] = ins[k].view();
    elements += capped_count(ins[k].shape);
  }
  Shape shape = sum_shape(views);
  elements += capped_count(shape);
  std::optional<Operand> target;
  if (!out.is_none()) {
    target = output_operand(out, "Sum");
    check_out(*target, "Sum", dtype, shape);
  }
  // Straight into out unless a dense input shares its bytes other than element for element.
  const bool direct =
      target && target->dense && std::ranges::all_of(ins, [&](const Operand& in) {
        return !in.dense || !overlaps(in, *target) ||
               (in.data == target->data && std::ranges::equal(in.view().shape, shape));
      });
  // A NumPy result is allocated by NumPy and summed into where it is.
  py::object array;
  std::byte* y_data = direct ? target->data : nullptr;
  if (!target && ins[0].kind == Kind::kNumpy) {
    array = numpy_result(ins[0], shape);
    y_data = numpy_data(array);
  }
  Tensor result;
  {
    std::optional<py::gil_scoped_release> release;
    if (elements >= kKeepGilElements) release.emplace();
    std::vector<Tensor> copies;
    for (std::size_t k = 0; k < ins.size(); ++k) {
      if (ins[k].dense) continue;
      copies.resize(ins.size());
      copies[k] = dense_copy(ins[k], ins[k].shape);
      views[k].data = copies[k].raw();
    }
    if (y_data != nullptr) {
      sum(views, {dtype, shape, y_data});
    } else {
      Tensor y(dtype, std::move(shape));
      sum(views, y.view());
      if (target) {
        scatter(y.view(), *target);
      } else {
        result = std::move(y);
      }
    }
  }
  if (target) return out;
  if (array) return array;
  return wrap(std::move(result), ins[0].kind, &ins[0]);
}

// ---- Sum's fast entry ------------------------------------------------------------------------

// The general entry, which every call this fast entry does not take is handed to unchanged, so
// that its checks and messages are the only ones.
PyObject* general_sum = nullptr;  // never freed

// Inputs the fast entry takes at most: their views live on the stack.
constexpr Py_ssize_t kFastInputs = 8;

// The element type of a NumPy array the fast entry takes as it is: exactly numpy.ndarray, of a
// floating type in native byte order, C order and aligned.
std::optional<DType> fast_dtype(PyObject* object, PyTypeObject* ndarray) {
  using Api = py::detail::npy_api;
  constexpr int kFlags = Api::NPY_ARRAY_C_CONTIGUOUS_ | Api::NPY_ARRAY_ALIGNED_;
  if (Py_TYPE(object) != ndarray) return std::nullopt;
  const auto* a = py::detail::array_proxy(object);
  const auto* d = py::detail::array_descriptor_proxy(a->descr);
  constexpr char kSwapped = std::endian::native == std::endian::little ? '>' : '<';
  if ((a->flags & kFlags) != kFlags || d->kind != 'f' || d->byteorder == kSwapped) {
    return std::nullopt;
  }
  switch (d->elsize) {
    case 2:
      return DType::kFloat16;
    case 4:
      return DType::kFloat32;
    case 8:
      return DType::kFloat64;
    default:
      return std::nullopt;
  }
}

bool same_shape(const py::detail::PyArray_Proxy* a, const py::detail::PyArray_Proxy* b) {
  return a->nd == b->nd &&
         (a->nd == 0 || std::memcmp(a->dimensions, b->dimensions,
                                    sizeof(*a->dimensions) * static_cast<std::size_t>(a->nd)) == 0);
}

// The common call, sum(a, b, ...[, out=c]) on NumPy arrays of one floating type, shape and
// dense layout, done without building operands; nullptr for any other call (or anything that
// fails), which the general entry then takes. An out= is taken only when the inputs' bytes are
// either its own (element for element) or apart from it.
PyObject* fast_sum(PyObject* const* args, Py_ssize_t nargs, PyObject* out) noexcept {
  using Api = py::detail::npy_api;
  if (nargs < 1 || nargs > kFastInputs) return nullptr;
  auto& api = Api::get();
  const std::optional<DType> dtype = fast_dtype(args[0], api.PyArray_Type_);
  if (!dtype) return nullptr;
  const auto* first = py::detail::array_proxy(args[0]);
  std::size_t count = 1;
  for (int i = 0; i < first->nd; ++i) count *= static_cast<std::size_t>(first->dimensions[i]);
  const std::size_t bytes = count * dtype_size(*dtype);
  static_assert(sizeof(*first->dimensions) == sizeof(int64_t));
  const std::span shape(reinterpret_cast<const int64_t*>(first->dimensions),
                        static_cast<std::size_t>(first->nd));
  const auto apart = [&](const py::detail::PyArray_Proxy* a, const std::byte* data) {
    const auto* other = reinterpret_cast<const std::byte*>(a->data);
    return other == data || other + bytes <= data || data + bytes <= other || bytes == 0;
  };
  const std::byte* out_data = nullptr;
  if (out != nullptr) {
    const auto* o = py::detail::array_proxy(out);
    if (fast_dtype(out, api.PyArray_Type_) != dtype ||
        (o->flags & Api::NPY_ARRAY_WRITEABLE_) == 0 || !same_shape(o, first)) {
      return nullptr;
    }
    out_data = reinterpret_cast<const std::byte*>(o->data);
  }
  SmallArray<ConstTensorView, kFastInputs> views(static_cast<std::size_t>(nargs),
                                                 {*dtype, shape, nullptr});
  for (Py_ssize_t k = 0; k < nargs; ++k) {
    const auto* a = py::detail::array_proxy(args[k]);
    if ((k > 0 && (fast_dtype(args[k], api.PyArray_Type_) != dtype || !same_shape(a, first))) ||
        (out != nullptr && !apart(a, out_data))) {
      return nullptr;
    }
    views[k].data = a->data;
  }
  try {
    py::object result = py::reinterpret_borrow<py::object>(out);
    if (out == nullptr) {
      // Beyond the limit the general entry raises the library's own error.
      if (bytes > memory_limit()) return nullptr;
      Py_INCREF(first->descr);  // NumPy takes this reference
      result = py::reinterpret_steal<py::object>(
          api.PyArray_NewFromDescr_(api.PyArray_Type_, first->descr, first->nd, first->dimensions,
                                    nullptr, nullptr, 0, nullptr));
      if (!result) {
        PyErr_Clear();
        return nullptr;
      }
    }
    // What sum_same_shape leaves to its caller was checked above.
    const TensorView y{*dtype, shape, numpy_data(result)};
    if (count * static_cast<std::size_t>(nargs + 1) >= std::size_t{kKeepGilElements}) {
      py::gil_scoped_release release;
      detail::sum_same_shape(views, y);
    } else {
      detail::sum_same_shape(views, y);
    }
    return result.release().ptr();
  } catch (...) {
    return nullptr;
  }
}

PyObject* sum_entry(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs,
                    PyObject* names) {
  PyObject* out = nullptr;
  const Py_ssize_t keywords = names == nullptr ? 0 : PyTuple_GET_SIZE(names);
  bool plain = keywords == 0;
  if (keywords == 1) {
    PyObject* name = PyTuple_GET_ITEM(names, 0);
    plain = PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "out") == 0;
    if (args[nargs] != Py_None) out = args[nargs];
  }
  if (plain) {
    if (PyObject* result = fast_sum(args, nargs, out)) return result;
  }
  return PyObject_Vectorcall(general_sum, args, static_cast<std::size_t>(nargs), names);
}

// ---- Docstrings: the first lines give help() and inspect.signature the signature. ----------

constexpr const char* kScanArgs = R"(
x: a NumPy array of float16, bfloat16 (ml_dtypes), float32, float64, int32, int64, uint32 or
    uint64 in any layout and byte order; a torch CPU tensor or any object with __dlpack__
    (float16 and bfloat16 included); or an array-like (list, scalar), converted by
    numpy.asarray. A dense input (C order, aligned, native byte order) is read where it is; any
    other is first copied into a dense buffer.
axis: the axis to scan along, negative counting from the end; None (the default) scans the
    flattened array in C order, as numpy.cumsum does.
exclusive: leave out x[j] from y[j] (the ONNX attribute): y starts at the identity.
reverse: scan from the end of the axis towards its start (the ONNX attribute).
out: where to write the result: an array or tensor of exactly the result's element type and
    shape (never cast or broadcast), which may be x itself (in place). It is returned.

Returns an array of the input's kind and element type (NumPy in, NumPy out; torch in, torch
out), of x's shape, or 1-D for axis=None. The result owns its memory; nothing is copied to
return it. The GIL is released while the kernels run.

Raises cumulus.InvalidArgumentError (a ValueError) for an axis, shape or attribute that is not
accepted, cumulus.UnsupportedTypeError (a TypeError) for an element type or object cumulus does
not take, cumulus.LimitError (a MemoryError) past the memory limit.)";

const std::string kCumSumDoc =
    std::string(R"(cumsum(x, axis=None, *, exclusive=False, reverse=False, out=None)
--

Cumulative sum along an axis: the ONNX CumSum operator.

y[..., j, ...] = x[..., 0, ...] + ... + x[..., j, ...]. Integers wrap around on overflow;
every floating output (float16, bfloat16, float32, float64) is the exact sum of its terms
rounded once to nearest even: the same bits on every machine, instruction set and number of
threads. An exact prefix past the type's range is +-inf, and finite again once it returns.
)") +
    kScanArgs;

const std::string kCumProdDoc =
    std::string(R"(cumprod(x, axis=None, *, exclusive=False, reverse=False, out=None)
--

Cumulative product along an axis: the ONNX CumProd operator.

y[..., j, ...] = x[..., 0, ...] * ... * x[..., j, ...]. Integers wrap around on overflow;
every floating output is within 1 ulp of the exact product, evaluated in one fixed order,
so the bits do not depend on the machine, instruction set or number of threads.
)") +
    kScanArgs;

constexpr const char* kSumDoc = R"(sum(*arrays, out=None)
--

Elementwise sum of one or more arrays: the ONNX Sum operator (not a reduction: for a total
along an axis use numpy.sum).

The arrays broadcast as NumPy broadcasts them and must have one floating element type
(float16, bfloat16, float32 or float64; no promotion). Each output is the exact sum of its
terms rounded once to nearest even, whatever the order of the arguments. Each argument may be a NumPy array in any layout and byte
order, a torch CPU tensor or any object with __dlpack__, or an array-like (numpy.asarray);
dense inputs are read where they are, others are first copied into a dense buffer.

out: an array or tensor of exactly the result's element type and broadcast shape, which may
    be one of the inputs of that shape (in place). It is returned.

Returns an array of the first argument's kind (NumPy or torch) that owns its memory. The GIL is
released while the kernels run.

Raises cumulus.InvalidArgumentError (a ValueError) for shapes that do not broadcast or no
arrays, cumulus.UnsupportedTypeError (a TypeError) for mixed or non-floating element types or
an out= of another type, cumulus.LimitError (a MemoryError) past the memory limit.)";

}  // namespace
}  // namespace cumulus::python

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  using namespace cumulus::python;  // NOLINT
  py::options options;
  options.disable_function_signatures();
  m.doc() = "The compiled part of cumulus; use the cumulus package.";
  m.attr("__version__") = CUMULUS_VERSION;
  add_errors(m);
  add_array_types(m);

  m.def(
      "cumsum",
      [](const py::object& x, const py::object& axis, const py::object& exclusive,
         const py::object& reverse, const py::object& out) {
        return scan(cumulus::OpKind::kCumSum, x, axis, exclusive, reverse, out);
      },
      py::arg("x"), py::arg("axis") = py::none(), py::kw_only(), py::arg("exclusive") = false,
      py::arg("reverse") = false, py::arg("out") = py::none(), kCumSumDoc.c_str());
  m.def(
      "cumprod",
      [](const py::object& x, const py::object& axis, const py::object& exclusive,
         const py::object& reverse, const py::object& out) {
        return scan(cumulus::OpKind::kCumProd, x, axis, exclusive, reverse, out);
      },
      py::arg("x"), py::arg("axis") = py::none(), py::kw_only(), py::arg("exclusive") = false,
      py::arg("reverse") = false, py::arg("out") = py::none(), kCumProdDoc.c_str());
  // sum: a METH_FASTCALL function in front of the pybind11 one, which stays the only source of
  // errors and of the general path.
  general_sum = py::cpp_function(&sum_arrays, py::name("sum"), py::kw_only(),
                                 py::arg("out") = py::none(), kSumDoc)
                    .release()
                    .ptr();
  static PyMethodDef sum_def{
      "sum", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(+sum_entry)),
      METH_FASTCALL | METH_KEYWORDS, kSumDoc};
  PyObject* sum = PyCFunction_NewEx(&sum_def, nullptr, m.attr("__name__").ptr());
  if (sum == nullptr) throw py::error_already_set();
  m.attr("sum") = py::reinterpret_steal<py::object>(sum);

  m.def(
      "set_num_threads",
      [](const py::object& n) {
        const int64_t v = integer(n, "set_num_threads", "n");
        if (v < 1) {
          raise_value_error(fmt::format("set_num_threads: n must be at least 1, not {}", v));
        }
        py::gil_scoped_release release;
        cumulus::set_num_threads(static_cast<int>(std::min<int64_t>(v, 256)));
      },
      py::arg("n"),
      "set_num_threads(n)\n--\n\nSets the number of threads the kernels use (1 to 256; more "
      "is taken as 256).\nResults do not depend on it.");
  m.def("num_threads", &cumulus::num_threads,
        "num_threads()\n--\n\nThe number of threads the kernels use (default: the machine's "
        "cores).");
  m.def(
      "kernel_isa", [] { return std::string(cumulus::kernel_isa()); },
      "kernel_isa()\n--\n\nThe instruction set of the kernels in use: \"scalar\", \"avx2\", "
      "\"avx512\" or \"avx512fp16\";\nthe best this CPU has, or lower when the environment "
      "variable CUMULUS_ISA "
      "asks for it.");
  m.def(
      "set_memory_limit",
      [](const py::object& bytes) {
        const int64_t v = integer(bytes, "set_memory_limit", "bytes");
        if (v < 0) {
          raise_value_error(fmt::format("set_memory_limit: bytes must be 0 or more, not {}", v));
        }
        cumulus::set_memory_limit(static_cast<std::size_t>(v));
      },
      py::arg("bytes"),
      "set_memory_limit(bytes)\n--\n\nThe largest buffer, in bytes, cumulus allocates for one "
      "array (results and the\ndense copies of inputs); a larger one raises cumulus.LimitError "
      "before anything is\nallocated. The default is CUMULUS_MEMORY_LIMIT or the machine's "
      "memory.");
  m.def("memory_limit", &cumulus::memory_limit,
        "memory_limit()\n--\n\nThe current memory limit in bytes (see set_memory_limit).");

  add_chunks(m);
  add_onnx(m);
}
