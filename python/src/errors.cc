#include "errors.h"

namespace cumulus::python {
namespace {

struct Classes {
  PyObject* base = nullptr;
  PyObject* invalid_argument = nullptr;
  PyObject* unsupported = nullptr;
  PyObject* parse = nullptr;
  PyObject* file = nullptr;
  PyObject* limit = nullptr;
  PyObject* type = nullptr;
};
// Created once at import and never freed: the translator may run until the interpreter ends.
Classes classes;

PyObject* make_class(py::module_& m, const char* name, const char* doc, py::tuple bases) {
  const std::string qualified = std::string("cumulus.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

PyObject* class_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return classes.invalid_argument;
    case ErrorCode::kUnsupported:
      return classes.unsupported;
    case ErrorCode::kParse:
      return classes.parse;
    case ErrorCode::kIo:
      return classes.file;
    case ErrorCode::kLimit:
      break;
  }
  return classes.limit;
}

}  // namespace

void add_errors(py::module_& m) {
  py::handle base = classes.base = make_class(
      m, "Error", "Every error cumulus raises; each is also the built-in exception it names.",
      py::make_tuple(py::handle(PyExc_Exception)));
  const auto with = [&](PyObject* builtin) { return py::make_tuple(base, py::handle(builtin)); };
  classes.invalid_argument = make_class(
      m, "InvalidArgumentError",
      "A value, shape, axis or attribute that the operator does not accept (a ValueError).",
      with(PyExc_ValueError));
  classes.unsupported = make_class(
      m, "UnsupportedError",
      "Valid ONNX that cumulus does not run: an unknown operator, opset or IR version, external "
      "data (a ValueError).",
      with(PyExc_ValueError));
  classes.parse = make_class(m, "ParseError", "A malformed model or tensor file (a ValueError).",
                             with(PyExc_ValueError));
  classes.file = make_class(m, "FileError", "A file that cannot be read or written (an OSError).",
                            with(PyExc_OSError));
  classes.limit =
      make_class(m, "LimitError",
                 "A size beyond the memory limit (cumulus.set_memory_limit) or beyond what can be "
                 "represented (a MemoryError).",
                 with(PyExc_MemoryError));
  classes.type = make_class(
      m, "UnsupportedTypeError",
      "An element type or an object that cumulus does not take, or an out= of another element "
      "type (a TypeError).",
      with(PyExc_TypeError));

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(class_of(e.code()), e.what());
    }
  });
}

void raise_type_error(const std::string& message) {
  PyErr_SetString(classes.type, message.c_str());
  throw py::error_already_set();
}

void raise_type_error_from(py::error_already_set& cause, const std::string& message) {
  const std::string text = message + ": " + py::str(cause.value()).cast<std::string>();
  py::raise_from(cause, classes.type, text.c_str());
  throw py::error_already_set();
}

void raise_value_error(const std::string& message) {
  PyErr_SetString(classes.invalid_argument, message.c_str());
  throw py::error_already_set();
}

}  // namespace cumulus::python
