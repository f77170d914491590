// The table of operator units, and what the versioned operators' units share.
#include "onnx/op_units.h"

#include <algorithm>
#include <array>

#include "core/fail.h"

namespace cumulus::onnx {

using detail::fail;

// Each defined in its own unit (op_*.cc).
extern const OpUnit kCumSumUnit;
extern const OpUnit kCumProdUnit;
extern const OpUnit kSumUnit;
extern const OpUnit kIdentityUnit;
extern const OpUnit kConstantUnit;

namespace {

constexpr std::array kUnits = {&kCumSumUnit, &kCumProdUnit, &kSumUnit, &kIdentityUnit,
                               &kConstantUnit};

}  // namespace

const OpUnit* find_unit(std::string_view type) noexcept {
  for (const OpUnit* unit : kUnits) {
    if (unit->type == type) return unit;
  }
  return nullptr;
}

std::string unit_names() {
  std::string list;
  for (std::size_t u = 0; u < kUnits.size(); ++u) {
    if (u > 0) list += u + 1 == kUnits.size() ? " and " : ", ";
    list += kUnits[u]->type;
  }
  return list;
}

int node_version(const NodeCheck& node, OpKind op) {
  try {
    return op_version(op, node.opset);
  } catch (const Error& e) {
    fail(e.code(), "{}: node {}: {}", node.what, node.label, e.what());
  }
}

std::string versioned_name(const NodeCheck& node, int version) {
  return fmt::format("{}-{}", node.node.op_type(), version);
}

void check_input_type(const NodeCheck& node, OpKind op, int version, std::size_t k,
                      std::string_view formal) {
  const int32_t t = node.types[node.inputs[k]];
  if (t == 0) return;
  const auto allowed = allowed_dtypes(op, version);
  const auto d = dtype_from_onnx(t);
  if (d && std::find(allowed.begin(), allowed.end(), *d) != allowed.end()) return;
  std::vector<std::string_view> list;
  for (DType a : allowed) list.push_back(dtype_name(a));
  fail(ErrorCode::kInvalidArgument,
       "{}: type {} is not supported (allowed: {}); input '{}' is tensor '{}' in node {}",
       versioned_name(node, version), onnx_type_name(t), fmt::join(list, ", "), formal,
       node.names[node.inputs[k]], node.label);
}

}  // namespace cumulus::onnx
