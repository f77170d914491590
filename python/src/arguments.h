// The binding's readings of Python arguments (shared by module.cc and chunks.cc), worded as the
// operators word their errors.
#pragma once

#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "errors.h"

namespace cumulus::python {

inline std::string type_name(py::handle object) {
  return py::str(py::type::handle_of(object).attr("__name__")).cast<std::string>();
}

// An integer argument, taken as Python takes indices (int, numpy integers, anything with
// __index__); `what` names it in messages.
inline int64_t integer(py::handle value, std::string_view op, std::string_view what) {
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) {
    PyErr_Clear();
    raise_type_error(fmt::format("{}: {} must be an integer, not {}", op, what, type_name(value)));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) {
    raise_value_error(
        fmt::format("{}: {} {} is out of range", op, what, py::str(index).cast<std::string>()));
  }
  return v;
}

// The exclusive and reverse attributes: False/True, 0/1 or a NumPy bool.
inline bool attribute(py::handle value, std::string_view op, std::string_view name) {
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True;
  static PyObject* numpy_bool =
      py::object(py::module_::import("numpy").attr("bool_")).release().ptr();  // never freed
  if (PyObject_TypeCheck(value.ptr(), reinterpret_cast<PyTypeObject*>(numpy_bool))) {
    return PyObject_IsTrue(value.ptr()) == 1;
  }
  if (PyIndex_Check(value.ptr())) {
    const int64_t v = integer(value, op, fmt::format("attribute '{}'", name));
    if (v != 0 && v != 1) {
      raise_value_error(fmt::format("{}: attribute '{}' must be 0 or 1, not {}", op, name, v));
    }
    return v == 1;
  }
  raise_type_error(fmt::format("{}: attribute '{}' must be a bool (or 0 or 1), not {}", op, name,
                               type_name(value)));
}

}  // namespace cumulus::python
