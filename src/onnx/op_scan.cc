// CumSum and CumProd: one unit, parameterised by the operator, for scans along an axis.
#include "core/fail.h"
#include "onnx/op_units.h"
#include "ops/checks.h"

namespace cumulus::onnx {
namespace {

using detail::fail;

int64_t int_attribute(const ::onnx::AttributeProto& a, std::string_view op,
                      const std::string& node) {
  if (a.type() != ::onnx::AttributeProto::INT) {
    fail(ErrorCode::kInvalidArgument, "{}: attribute '{}' must be an int (node {})", op, a.name(),
         node);
  }
  return a.i();
}

template <OpKind kOp>
void check_scan(const NodeCheck& node, NodePlan& plan) {
  const auto& ins = node.inputs;
  const int version = node_version(node, kOp);
  const std::string versioned = versioned_name(node, version);
  if (ins.size() != 2) {
    fail(ErrorCode::kInvalidArgument, "{}: node {} needs 2 inputs (x, axis), has {}", versioned,
         node.label, ins.size());
  }
  plan.formals = {"x", "axis"};
  check_input_type(node, kOp, version, 0, "x");
  const int32_t axis_type = node.types[ins[1]];
  const std::optional<DType> axis_dtype = dtype_from_onnx(axis_type);
  if (axis_type != 0 && !(axis_dtype && is_axis_dtype(*axis_dtype))) {
    detail::fail_axis_type(
        versioned, onnx_type_name(axis_type),
        fmt::format(" (tensor '{}' in node {})", node.names[ins[1]], node.label));
  }
  for (const auto& a : node.node.attribute()) {
    if (a.name() != "exclusive" && a.name() != "reverse") {
      fail(ErrorCode::kInvalidArgument, "{}: unknown attribute '{}' (node {})", versioned, a.name(),
           node.label);
    }
    const int64_t v = int_attribute(a, versioned, node.label);
    if (v != 0 && v != 1) {
      fail(ErrorCode::kInvalidArgument, "{}: attribute '{}' must be 0 or 1, not {} (node {})",
           versioned, a.name(), v, node.label);
    }
    (a.name() == "exclusive" ? plan.step.scan.exclusive : plan.step.scan.reverse) = v == 1;
  }
  plan.step.version = version;
  plan.type = node.types[ins[0]];
}

template <OpKind kOp>
void run_scan(const Step& step, StepRun& values) {
  const Slot& first = values.slots[step.inputs[0]];
  const int64_t axis = scan_axis(kOp, *values.slots[step.inputs[1]].view);
  const ConstTensorView x = *first.view;
  check_dtype(kOp, step.version, x.dtype);
  Slot& out = values.slots[step.output];
  out.owned = values.reusable(step.inputs[0])
                  ? first.owned
                  : std::make_shared<Tensor>(x.dtype, Shape(x.shape.begin(), x.shape.end()));
  if constexpr (kOp == OpKind::kCumSum) {
    cumsum(x, axis, out.owned->view(), step.scan);
  } else {
    cumprod(x, axis, out.owned->view(), step.scan);
  }
  out.view = out.owned->view();
}

}  // namespace

extern const OpUnit kCumSumUnit = {"CumSum", check_scan<OpKind::kCumSum>,
                                   run_scan<OpKind::kCumSum>};
extern const OpUnit kCumProdUnit = {"CumProd", check_scan<OpKind::kCumProd>,
                                    run_scan<OpKind::kCumProd>};

}  // namespace cumulus::onnx
