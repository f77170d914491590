#include "onnx_model.h"

#include <map>
#include <string>
#include <vector>

#include "arrays.h"
#include "cumulus/onnx.h"

namespace cumulus::python {
namespace {

using onnx::Model;
using onnx::ValueInfo;

// (name, dtype, shape, has_default): dtype is cumulus's name of the type, ONNX's name of a type
// cumulus does not run, or None when undeclared; shape is None for any rank, None for a
// symbolic dimension.
py::list describe(const std::vector<ValueInfo>& values) {
  py::list list;
  for (const ValueInfo& v : values) {
    py::object dtype = py::none();
    if (v.dtype) {
      dtype = py::str(std::string(dtype_name(*v.dtype)));
    } else if (v.onnx_type != 0) {
      dtype = py::str(onnx::onnx_type_name(v.onnx_type));
    }
    py::object shape = py::none();
    if (v.has_shape) {
      py::list dims;
      for (const auto& d : v.dims) dims.append(d ? py::object(py::int_(*d)) : py::none());
      shape = py::tuple(dims);
    }
    list.append(py::make_tuple(v.name, dtype, shape, v.has_default));
  }
  return list;
}

py::dict run(const Model& model, const py::dict& feeds) {
  std::vector<std::string> names;
  std::vector<Operand> ins;
  bool torch = false;
  for (const auto& [key, value] : feeds) {
    names.push_back(py::str(key).cast<std::string>());
    ins.push_back(input_operand(value, "run", names.back()));
    torch = torch || ins.back().kind == Kind::kTorch;
  }
  std::vector<Tensor> outputs;
  {
    py::gil_scoped_release release;
    std::vector<Tensor> copies(ins.size());
    std::map<std::string, ConstTensorView, std::less<>> views;
    for (std::size_t k = 0; k < ins.size(); ++k) {
      ConstTensorView v = ins[k].view();
      if (!ins[k].dense) {
        copies[k] = dense_copy(ins[k], ins[k].shape);
        v.data = copies[k].raw();
      }
      views.emplace(names[k], v);
    }
    outputs = model.run(views);
  }
  py::dict result;
  const auto& declared = model.outputs();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    result[py::str(declared[i].name)] =
        wrap(std::move(outputs[i]), torch ? Kind::kTorch : Kind::kNumpy, nullptr);
  }
  return result;
}

}  // namespace

void add_onnx(py::module_& m) {
  py::class_<Model>(m, "_Model")
      .def_property_readonly("inputs", [](const Model& model) { return describe(model.inputs()); })
      .def_property_readonly("outputs",
                             [](const Model& model) { return describe(model.outputs()); })
      .def_property_readonly("ir_version", &Model::ir_version)
      .def_property_readonly("opset", &Model::opset)
      .def("run", &run, py::arg("feeds"));
  m.def(
      "_load_model_file",
      [](const std::string& path) {
        py::gil_scoped_release release;
        return Model::load(path);
      },
      py::arg("path"));
  m.def(
      "_load_model_bytes",
      [](const py::bytes& bytes) {
        char* start = nullptr;
        Py_ssize_t size = 0;
        if (PyBytes_AsStringAndSize(bytes.ptr(), &start, &size) != 0) throw py::error_already_set();
        const std::span data(reinterpret_cast<const std::byte*>(start),
                             static_cast<std::size_t>(size));
        py::gil_scoped_release release;
        return Model::parse(data);
      },
      py::arg("bytes"));
}

}  // namespace cumulus::python
