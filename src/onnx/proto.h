// Conversions between ONNX protobuf messages and cumulus tensors, for the front end's sources.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "cumulus/tensor.h"

namespace cumulus::onnx {

// The front end's facts about each element type; the rest are in dtype_info().
struct OnnxTypeInfo {
  int32_t id;                    // TensorProto.DataType
  std::string_view typed_field;  // where a TensorProto without raw_data keeps the values
};
const OnnxTypeInfo& onnx_type_info(DType dtype) noexcept;

// Checks the proto whole (type, dims, sizes, no external data) before allocating; `what` names
// it in errors ("initializer 'w'").
Tensor tensor_from_proto(const ::onnx::TensorProto& proto, std::string_view what);

// Throws (kUnsupported) when the proto keeps its values outside itself (external data): cumulus
// never opens a file a model names.
void check_no_external_data(const ::onnx::TensorProto& proto, std::string_view what);

// Throws (kLimit) when `bytes` is more than protobuf parses at once (2 GiB).
void check_protobuf_size(std::size_t bytes, std::string_view what);

// read_file for a file holding one protobuf message: one too large to parse is refused before it
// is read, so the error is that limit, not the memory it would take.
std::string read_protobuf_file(const std::filesystem::path& path, std::string_view what);

}  // namespace cumulus::onnx
