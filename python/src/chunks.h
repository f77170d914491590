// cumulus.ScanState, scan_chunk and chunk_total: scans cut into chunks along their axis.
#pragma once

#include <pybind11/pybind11.h>

namespace cumulus::python {

void add_chunks(pybind11::module_& m);

}  // namespace cumulus::python
