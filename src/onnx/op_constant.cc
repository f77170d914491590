// Constant: a value known when the model is checked; it makes no step.
#include "core/fail.h"
#include "onnx/op_units.h"
#include "onnx/proto.h"

namespace cumulus::onnx {
namespace {

using detail::fail;

Tensor constant_value(const ::onnx::NodeProto& node, const std::string& label) {
  if (node.attribute_size() != 1) {
    fail(ErrorCode::kInvalidArgument,
         "Constant: node {} must have exactly one value attribute, has {}", label,
         node.attribute_size());
  }
  const auto& a = node.attribute(0);
  const std::string what = fmt::format("Constant node {}", label);
  if (a.name() == "value" && a.type() == ::onnx::AttributeProto::TENSOR) {
    return tensor_from_proto(a.t(), what);
  }
  if (a.name() == "value_float" && a.type() == ::onnx::AttributeProto::FLOAT) {
    return Tensor::scalar<float>(a.f());
  }
  if (a.name() == "value_int" && a.type() == ::onnx::AttributeProto::INT) {
    return Tensor::scalar<int64_t>(a.i());
  }
  if (a.name() == "value_floats" && a.type() == ::onnx::AttributeProto::FLOATS) {
    const std::vector<float> v(a.floats().begin(), a.floats().end());
    return Tensor::from_values<float>({static_cast<int64_t>(v.size())}, v);
  }
  if (a.name() == "value_ints" && a.type() == ::onnx::AttributeProto::INTS) {
    const std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    return Tensor::from_values<int64_t>({static_cast<int64_t>(v.size())}, v);
  }
  fail(ErrorCode::kUnsupported,
       "Constant: node {} has attribute '{}', which cumulus does not support (supported: value, "
       "value_float, value_floats, value_int, value_ints)",
       label, a.name());
}

void check_constant(const NodeCheck& node, NodePlan& plan) {
  if (!node.inputs.empty())
    fail(ErrorCode::kInvalidArgument, "Constant: node {} takes no inputs", node.label);
  plan.constant = std::make_shared<Tensor>(constant_value(node.node, node.label));
  plan.type = onnx_from_dtype(plan.constant->dtype());
}

}  // namespace

extern const OpUnit kConstantUnit = {"Constant", check_constant, nullptr};

}  // namespace cumulus::onnx
