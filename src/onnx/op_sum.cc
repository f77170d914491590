// Sum: the element-wise sum of one or more inputs, broadcast from version 8.
#include "core/fail.h"
#include "onnx/op_units.h"
#include "ops/checks.h"

namespace cumulus::onnx {
namespace {

using detail::fail;

void check_sum(const NodeCheck& node, NodePlan& plan) {
  const auto& ins = node.inputs;
  const int version = node_version(node, OpKind::kSum);
  const std::string versioned = versioned_name(node, version);
  auto type_of = [&](std::size_t k) { return node.types[ins[k]]; };
  if (ins.empty())
    fail(ErrorCode::kInvalidArgument, "{}: node {} needs at least one input", versioned,
         node.label);
  for (std::size_t k = 0; k < ins.size(); ++k) {
    plan.formals.push_back(fmt::format("data_{}", k));
    check_input_type(node, OpKind::kSum, version, k, plan.formals.back());
    if (type_of(k) != 0 && type_of(0) != 0 && type_of(k) != type_of(0)) {
      detail::fail_sum_type_mismatch(versioned, k, onnx_type_name(type_of(k)),
                                     onnx_type_name(type_of(0)),
                                     fmt::format(" (node {})", node.label));
    }
  }
  for (const auto& a : node.node.attribute()) {
    if (a.name() == "consumed_inputs" && version == 1) continue;  // legacy, ignored
    fail(ErrorCode::kInvalidArgument, "{}: unknown attribute '{}' (node {})", versioned, a.name(),
         node.label);
  }
  plan.step.version = version;
  plan.step.sum.broadcast = version >= 8;
  plan.type = type_of(0);
}

void run_sum(const Step& step, StepRun& values) {
  std::vector<ConstTensorView> views;
  for (int v : step.inputs) views.push_back(*values.slots[v].view);
  check_dtype(OpKind::kSum, step.version, views[0].dtype);
  const Shape shape = sum_shape(views, step.sum);
  std::shared_ptr<Tensor> target;
  for (int v : step.inputs) {
    if (values.reusable(v) && values.slots[v].owned->shape() == shape) {
      target = values.slots[v].owned;
      break;
    }
  }
  if (!target) target = std::make_shared<Tensor>(views[0].dtype, shape);
  sum(views, target->view(), step.sum);
  Slot& out = values.slots[step.output];
  out.owned = std::move(target);
  out.view = out.owned->view();
}

}  // namespace

extern const OpUnit kSumUnit = {"Sum", check_sum, run_sum};

}  // namespace cumulus::onnx
