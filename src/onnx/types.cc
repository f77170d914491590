// ONNX TensorProto.DataType numbers and names.
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cumulus/onnx.h"
#include "onnx/proto.h"

namespace cumulus::onnx {
namespace {

// Indexed by TensorProto.DataType. Spelled out here rather than taken from onnx_pb.h: the ONNX
// release cumulus builds against stops at BFLOAT16, and messages should still name newer types.
// FLOAT and DOUBLE take NumPy's names so they agree with dtype_name().
constexpr std::array<std::string_view, 27> kOnnxTypeNames = {
    "undefined",       // 0
    "float32",         // 1 FLOAT
    "uint8",           // 2
    "int8",            // 3
    "uint16",          // 4
    "int16",           // 5
    "int32",           // 6
    "int64",           // 7
    "string",          // 8
    "bool",            // 9
    "float16",         // 10
    "float64",         // 11 DOUBLE
    "uint32",          // 12
    "uint64",          // 13
    "complex64",       // 14
    "complex128",      // 15
    "bfloat16",        // 16
    "float8e4m3fn",    // 17
    "float8e4m3fnuz",  // 18
    "float8e5m2",      // 19
    "float8e5m2fnuz",  // 20
    "uint4",           // 21
    "int4",            // 22
    "float4e2m1",      // 23
    "float8e8m0",      // 24
    "uint2",           // 25
    "int2",            // 26
};

}  // namespace

const OnnxTypeInfo& onnx_type_info(DType dtype) noexcept {
  // TensorProto.DataType and the typed field that holds the values when raw_data is not used:
  // float16 and bfloat16 keep their bit patterns in int32_data, uint32 widens into uint64_data.
  static constexpr OnnxTypeInfo kInfo[kNumDTypes] = {
      {1, "float_data"}, {11, "double_data"}, {10, "int32_data"},  {16, "int32_data"},
      {6, "int32_data"}, {7, "int64_data"},   {12, "uint64_data"}, {13, "uint64_data"},
  };
  return kInfo[static_cast<int>(dtype)];
}

std::optional<DType> dtype_from_onnx(int32_t onnx_type) noexcept {
  for (DType dtype : kAllDTypes) {
    if (onnx_from_dtype(dtype) == onnx_type) return dtype;
  }
  return std::nullopt;
}

int32_t onnx_from_dtype(DType dtype) noexcept { return onnx_type_info(dtype).id; }

std::string onnx_type_name(int32_t onnx_type) {
  if (onnx_type >= 0 && static_cast<std::size_t>(onnx_type) < kOnnxTypeNames.size()) {
    return std::string(kOnnxTypeNames[static_cast<std::size_t>(onnx_type)]);
  }
  return fmt::format("unknown type {}", onnx_type);
}

}  // namespace cumulus::onnx
