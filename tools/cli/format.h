// cumulus CLI: tensors printed the way the ONNX operator pages print NumPy arrays.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "cumulus/tensor.h"

namespace cumulus::cli {

// The text of NumPy 1.24's np.array2string(a, separator=", ") under the default print options
// (precision 8, floatmode "maxprec", linewidth 75, threshold 1000, edgeitems 3): "[1., 2.]",
// "[[1, 2],\n [3, 4]]", a bare "10." for rank 0, "[]" for no elements. Lines are not indented
// and the text has no final newline. bfloat16, which NumPy lacks, prints like float16 with its
// own shortest digits.
std::string format_array(ConstTensorView t);

// A block of the operator pages: "name: shape=(2, 3), dtype=float64\n" indented by `indent`
// spaces, then the array's lines indented by `indent + 2` (blank lines stay empty), each line
// ending in a newline.
std::string format_named(std::string_view name, ConstTensorView t, int indent);

}  // namespace cumulus::cli
