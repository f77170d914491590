// cumulus._core's ONNX part: loading models and running them on Python arrays.
#pragma once

#include <pybind11/pybind11.h>

namespace cumulus::python {

void add_onnx(pybind11::module_& m);

}  // namespace cumulus::python
