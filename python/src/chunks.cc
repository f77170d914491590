#include "chunks.h"

#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <span>
#include <string>
#include <utility>

#include "arguments.h"
#include "arrays.h"
#include "cumulus/chunks.h"
#include "errors.h"

namespace cumulus::python {
namespace {

// The Python names of the scans.
std::string_view python_name(OpKind op) { return op == OpKind::kCumSum ? "cumsum" : "cumprod"; }

OpKind op_argument(py::handle value, std::string_view where) {
  if (py::isinstance<py::str>(value)) {
    const auto name = value.cast<std::string>();
    if (name == "cumsum") return OpKind::kCumSum;
    if (name == "cumprod") return OpKind::kCumProd;
    raise_value_error(
        fmt::format("{}: op must be \"cumsum\" or \"cumprod\", not \"{}\"", where, name));
  }
  raise_type_error(
      fmt::format("{}: op must be \"cumsum\" or \"cumprod\", not {}", where, type_name(value)));
}

// A dtype as a name ("float32"), a NumPy dtype or type, or a torch dtype.
DType dtype_argument(py::handle value, std::string_view where) {
  std::string name;
  if (py::isinstance<py::str>(value)) {
    name = value.cast<std::string>();
  } else if (const auto text = py::str(value).cast<std::string>(); text.starts_with("torch.")) {
    name = text.substr(6);
  } else {
    try {
      name = py::str(py::module_::import("numpy").attr("dtype")(value).attr("name"));
    } catch (py::error_already_set& e) {
      raise_type_error_from(e, fmt::format("{}: dtype {} is not an element type", where,
                                           py::repr(value).cast<std::string>()));
    }
  }
  const std::optional<DType> dtype = dtype_from_name(name);
  if (!dtype) {
    raise_type_error(fmt::format("{}: dtype {} is not an element type cumulus scans", where,
                                 py::repr(value).cast<std::string>()));
  }
  return *dtype;
}

Shape shape_argument(py::handle value, std::string_view where) {
  if (!py::isinstance<py::iterable>(value) || py::isinstance<py::str>(value)) {
    raise_type_error(fmt::format("{}: lines_shape must be a sequence of integers, not {}", where,
                                 type_name(value)));
  }
  Shape shape;
  for (py::handle d : value) {
    shape.push_back(integer(d, where, "a dimension of lines_shape"));
    if (shape.back() < 0) {
      raise_value_error(
          fmt::format("{}: lines_shape has a negative dimension {}", where, shape.back()));
    }
  }
  return shape;
}

ScanState& state_argument(py::handle value, std::string_view where, std::string_view what) {
  if (!py::isinstance<ScanState>(value)) {
    raise_type_error(
        fmt::format("{}: {} must be a cumulus.ScanState, not {}", where, what, type_name(value)));
  }
  return value.cast<ScanState&>();
}

py::bytes state_bytes(const ScanState& state) {
  std::vector<std::byte> bytes;
  {
    py::gil_scoped_release release;
    bytes = state.to_bytes();
  }
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

ScanState state_from_bytes(const py::handle& value) {
  if (!PyBytes_Check(value.ptr()) && !PyByteArray_Check(value.ptr()) &&
      !PyMemoryView_Check(value.ptr())) {
    raise_type_error(
        fmt::format("ScanState.from_bytes: bytes must be bytes, bytearray or memoryview, not {}",
                    type_name(value)));
  }
  const py::buffer_info info = py::reinterpret_borrow<py::buffer>(value).request();
  if (info.ndim > 1 || (info.ndim == 1 && info.strides[0] != info.itemsize)) {
    raise_value_error("ScanState.from_bytes: bytes must be contiguous");
  }
  const std::span bytes(static_cast<const std::byte*>(info.ptr),
                        static_cast<std::size_t>(info.size * info.itemsize));
  py::gil_scoped_release release;
  return ScanState::from_bytes(bytes);
}

std::string state_repr(const ScanState& state) {
  std::string shape = "(";
  for (const int64_t d : state.lines_shape()) shape += fmt::format("{}, ", d);
  if (state.lines_shape().size() > 1) shape.resize(shape.size() - 2);
  if (state.lines_shape().size() == 1) shape.pop_back();
  shape += ")";
  return fmt::format("cumulus.ScanState(\"{}\", \"{}\", {})", python_name(state.op()),
                     dtype_name(state.dtype()), shape);
}

py::object scan_chunk_binding(const py::object& x, const py::object& axis, const py::object& state,
                              const py::object& op, const py::object& exclusive,
                              const py::object& reverse, const py::object& out) {
  ScanState& s = state_argument(state, "scan_chunk", "state");
  const OpKind kind = op.is_none() ? s.op() : op_argument(op, "scan_chunk");
  const std::string_view name = op_name(kind);
  const Operand in = input_operand(x, name, "x");
  const ScanOptions options{attribute(exclusive, name, "exclusive"),
                            attribute(reverse, name, "reverse")};
  const int64_t a = integer(axis, name, "axis");
  // The state is changed without the GIL: one state is for one thread at a time.
  return scan_into(in, in.shape, out, name, [&](ConstTensorView xv, TensorView yv) {
    scan_chunk(kind, xv, a, yv, options, s);
  });
}

ScanState chunk_total_binding(const py::object& x, const py::object& axis, const py::object& op) {
  const OpKind kind = op_argument(op, "chunk_total");
  const std::string_view name = op_name(kind);
  const Operand in = input_operand(x, name, "x");
  const int64_t a = integer(axis, name, "axis");
  py::gil_scoped_release release;
  if (in.dense) return chunk_total(kind, in.view(), a);
  const Tensor copy = dense_copy(in, in.shape);
  return chunk_total(kind, {in.dtype, in.shape, copy.raw()}, a);
}

constexpr const char* kScanStateDoc = R"(ScanState(op, dtype, lines_shape)

Everything before a point of a scan's axis, for every line of the scan (every position of the
other axes), in the kernels' exact form: an exact sum for a floating cumsum, the wrapping
accumulator for integers, the product state for a floating cumprod. It carries a scan from one
chunk of the axis to the next (scan_chunk), or is formed from the chunks' totals (chunk_total,
combine) in any grouping, as an engine such as Dask does (cumulus.dask).

ScanState(op, dtype, lines_shape) is the empty state (nothing before): op "cumsum" or "cumprod";
dtype a name ("float32"), a NumPy dtype or type, or a torch dtype; lines_shape the shape of the
arrays without the scanned axis. States pickle (through to_bytes) and copy (copy.copy, .copy()).
A state must not be used from two threads at once.)";

constexpr const char* kScanChunkDoc =
    R"(scan_chunk(x, axis, state, *, op=None, exclusive=False, reverse=False, out=None)
--

Scans one chunk of an array along `axis` as the one-pass scan of the whole array would for those
positions, given that `state` holds everything before the chunk in scan order (for reverse=True:
everything after it), then adds the chunk to `state`, in place.

Feed the chunks in scan order (from the last for reverse=True) through one state that starts
empty; for any cut of the axis (chunks of length 0 and 1 too), the outputs put together are, bit
for bit, cumulus.cumsum's (every type) and cumulus.cumprod's (integers); a floating cumprod keeps
cumprod's promise (within 1 ulp of the exact product).

x: a chunk, as cumsum takes x (NumPy, torch, DLPack, array-likes), of the whole array's shape but
    for the axis, and of the state's dtype.
axis: the scanned axis, negative counting from the end.
state: a cumulus.ScanState of x's dtype, with lines_shape x's shape without the axis; changed in
    place (on an error it is left as it was).
op: "cumsum" or "cumprod"; None takes the state's (another raises).
exclusive, reverse, out: as in cumsum (out: exactly x's dtype and shape; may be x).

Returns the chunk's output, of x's kind, dtype and shape (or out). The GIL is released while the
kernels run.

Raises cumulus.InvalidArgumentError (a ValueError) for an axis, attribute, or a state of another
op, dtype or lines shape; cumulus.UnsupportedTypeError (a TypeError) for an element type or
object cumulus does not take.)";

constexpr const char* kChunkTotalDoc = R"(chunk_total(x, axis, *, op="cumsum")
--

The state of a chunk's own elements along `axis`: what scan_chunk would add to a state. A
chunk's carry is the combine of the totals of the chunks before it (after it, for a reverse
scan), in any grouping.

x: a chunk, as scan_chunk takes it. op: "cumsum" or "cumprod".

Returns a cumulus.ScanState with x's dtype and lines_shape x's shape without the axis.)";

}  // namespace

void add_chunks(py::module_& m) {
  py::class_<ScanState>(m, "ScanState", kScanStateDoc)
      .def(py::init(
               [](const py::object& op, const py::object& dtype, const py::object& lines_shape) {
                 return ScanState(op_argument(op, "ScanState"), dtype_argument(dtype, "ScanState"),
                                  shape_argument(lines_shape, "ScanState"));
               }),
           py::arg("op"), py::arg("dtype"), py::arg("lines_shape"),
           "__init__(self, op, dtype, lines_shape)\n--\n\nThe empty state (nothing before) of op "
           "(\"cumsum\" or \"cumprod\") over dtype,\nfor arrays whose shape without the scanned "
           "axis is lines_shape.")
      .def_property_readonly(
          "op", [](const ScanState& s) { return std::string(python_name(s.op())); },
          "\"cumsum\" or \"cumprod\".")
      .def_property_readonly(
          "dtype", [](const ScanState& s) { return std::string(dtype_name(s.dtype())); },
          "The element type's name (\"float32\").")
      .def_property_readonly(
          "lines_shape",
          [](const ScanState& s) {
            py::tuple shape(s.lines_shape().size());
            for (std::size_t i = 0; i < shape.size(); ++i) shape[i] = py::int_(s.lines_shape()[i]);
            return shape;
          },
          "The shape of the scanned arrays without the scanned axis (a tuple).")
      .def(
          "combine",
          [](ScanState& s, const py::object& later) {
            const ScanState& l = state_argument(later, "ScanState.combine", "later");
            py::gil_scoped_release release;
            if (&l == &s) {
              s.combine(ScanState(l));
            } else {
              s.combine(l);
            }
          },
          py::arg("later"),
          "combine(later)\n--\n\nAppends `later`, the state of the elements that follow this "
          "one's in scan order (for\na reverse scan: those before them), in place: afterwards "
          "this state holds both.\nAssociative. Both must be of one op, dtype and lines_shape "
          "(else\ncumulus.InvalidArgumentError).")
      .def(
          "copy", [](const ScanState& s) { return ScanState(s); },
          "copy()\n--\n\nAn independent copy.")
      .def("__copy__", [](const ScanState& s) { return ScanState(s); })
      .def("__deepcopy__", [](const ScanState& s, const py::object&) { return ScanState(s); })
      .def("to_bytes", &state_bytes,
           "to_bytes()\n--\n\nA self-describing byte form (op, dtype, lines shape, every line's "
           "accumulator),\nread back by ScanState.from_bytes.")
      .def_static(
          "from_bytes", &state_from_bytes, py::arg("bytes"),
          "from_bytes(bytes)\n--\n\nThe state that to_bytes wrote. The bytes are validated: "
          "truncated, altered or\nforeign bytes raise cumulus.InvalidArgumentError (a "
          "ValueError) naming what is wrong.")
      .def(py::pickle([](const ScanState& s) { return state_bytes(s); },
                      [](const py::bytes& b) { return state_from_bytes(b); }))
      .def("__repr__", &state_repr);

  m.def("scan_chunk", &scan_chunk_binding, py::arg("x"), py::arg("axis"), py::arg("state"),
        py::kw_only(), py::arg("op") = py::none(), py::arg("exclusive") = false,
        py::arg("reverse") = false, py::arg("out") = py::none(), kScanChunkDoc);
  m.def("chunk_total", &chunk_total_binding, py::arg("x"), py::arg("axis"), py::kw_only(),
        py::arg("op") = "cumsum", kChunkTotalDoc);
}

}  // namespace cumulus::python
