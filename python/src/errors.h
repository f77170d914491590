// The Python exception classes and the one mapping from cumulus::ErrorCode to them.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "cumulus/error.h"

namespace cumulus::python {

namespace py = pybind11;

// Creates cumulus.Error and its subclasses in `m` and registers the translator that turns a
// cumulus::Error into the class of its code.
void add_errors(py::module_& m);

// For the binding's own argument checks: an object or element type cumulus does not take
// (a TypeError), or a value it does not accept (a ValueError).
[[noreturn]] void raise_type_error(const std::string& message);
[[noreturn]] void raise_value_error(const std::string& message);
// A type error caused by `cause` (its __cause__), ending in the cause's message.
[[noreturn]] void raise_type_error_from(py::error_already_set& cause, const std::string& message);

// Runs `check`, raising whatever cumulus::Error it throws as a type error: for the core's
// checks of element types, which share ErrorCode::kInvalidArgument with shape and axis errors.
template <class Check>
void as_type_error(const Check& check) {
  try {
    check();
  } catch (const Error& e) {
    raise_type_error(e.what());
  }
}

}  // namespace cumulus::python
