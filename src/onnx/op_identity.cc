// Identity: the output is the input, shared, not copied.
#include "core/fail.h"
#include "onnx/op_units.h"

namespace cumulus::onnx {
namespace {

using detail::fail;

void check_identity(const NodeCheck& node, NodePlan& plan) {
  if (node.inputs.size() != 1) {
    fail(ErrorCode::kInvalidArgument, "Identity: node {} needs 1 input, has {}", node.label,
         node.inputs.size());
  }
  if (node.node.attribute_size() > 0) {
    fail(ErrorCode::kInvalidArgument, "Identity: unknown attribute '{}' (node {})",
         node.node.attribute(0).name(), node.label);
  }
  plan.formals = {"input"};
  plan.type = node.types[node.inputs[0]];
}

void run_identity(const Step& step, StepRun& values) {
  values.slots[step.output] = values.slots[step.inputs[0]];
}

}  // namespace

extern const OpUnit kIdentityUnit = {"Identity", check_identity, run_identity};

}  // namespace cumulus::onnx
