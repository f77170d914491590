// Which operator versions exist and which element types each accepts, as the ONNX pages list.
#include <algorithm>
#include <array>
#include <string_view>
#include <vector>

#include "core/fail.h"
#include "cumulus/onnx.h"

namespace cumulus::onnx {
namespace {

using detail::fail;
using enum DType;
constexpr std::array kCumSum11{kFloat32, kFloat64, kInt32, kInt64, kUInt32, kUInt64};
constexpr std::array kCumSum14{kBFloat16, kFloat64, kFloat32, kFloat16,
                               kInt32,    kInt64,   kUInt32,  kUInt64};
constexpr std::array kSum1{kFloat16, kFloat32, kFloat64};
constexpr std::array kSum13{kBFloat16, kFloat16, kFloat32, kFloat64};

}  // namespace

int op_version(OpKind op, int64_t opset) {
  if (opset > kMaxOpset) {
    fail(ErrorCode::kUnsupported,
         "{}: opset {} is newer than cumulus knows (the newest it implements is {})", op_name(op),
         opset, kMaxOpset);
  }
  const int64_t first = op == OpKind::kCumSum ? 11 : op == OpKind::kCumProd ? 26 : 1;
  if (opset < first) {
    fail(ErrorCode::kInvalidArgument, "{} does not exist at opset {} (it was added in opset {})",
         op_name(op), opset, first);
  }
  switch (op) {
    case OpKind::kCumSum:
      return opset >= 14 ? 14 : 11;
    case OpKind::kCumProd:
      return 26;
    case OpKind::kSum:
      break;
  }
  return opset >= 13 ? 13 : opset >= 8 ? 8 : opset >= 6 ? 6 : 1;
}

std::span<const DType> allowed_dtypes(OpKind op, int version) {
  switch (op) {
    case OpKind::kCumSum:
      return version >= 14 ? std::span<const DType>(kCumSum14) : kCumSum11;
    case OpKind::kCumProd:
      return kCumSum14;
    case OpKind::kSum:
      break;
  }
  return version >= 13 ? std::span<const DType>(kSum13) : kSum1;
}

void check_dtype(OpKind op, int version, DType dtype) {
  const auto allowed = allowed_dtypes(op, version);
  if (std::find(allowed.begin(), allowed.end(), dtype) != allowed.end()) return;
  std::vector<std::string_view> names;
  for (DType t : allowed) names.push_back(dtype_name(t));
  fail(ErrorCode::kInvalidArgument, "{}-{}: type {} is not supported (allowed: {})", op_name(op),
       version, dtype_name(dtype), fmt::join(names, ", "));
}

}  // namespace cumulus::onnx
