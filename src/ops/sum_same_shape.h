// Sum without its checks, for a caller that has made them itself: the Python binding's common
// call, on arrays of one shape, where the checks would cost more than adding 1000 elements.
// An internal header, reached through the src/ include path; not part of the public API.
#pragma once

#include <span>

#include "cumulus/tensor.h"

namespace cumulus::detail {

// y = inputs[0] + inputs[1] + ..., as cumulus::sum computes it, for at least one input, each of
// y's floating element type and shape, with data when it has elements, and each either y's own
// buffer or apart from it. Nothing of that is checked.
void sum_same_shape(std::span<const ConstTensorView> inputs, TensorView y);

}  // namespace cumulus::detail
