// Conversions between ONNX protobuf messages and cumulus tensors, for the front end's sources.
#pragma once

#include <onnx/onnx_pb.h>

#include <string_view>

#include "cumulus/tensor.h"

namespace cumulus::onnx {

// Checks the proto whole (type, dims, sizes, no external data) before allocating; `what` names
// it in errors ("initializer 'w'").
Tensor tensor_from_proto(const ::onnx::TensorProto& proto, std::string_view what);

// Throws (kUnsupported) when the proto keeps its values outside itself (external data): cumulus
// never opens a file a model names.
void check_no_external_data(const ::onnx::TensorProto& proto, std::string_view what);

}  // namespace cumulus::onnx
