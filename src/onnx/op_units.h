// The front end's operators: one unit per operator checks a node and makes its step; the model
// finds a unit by the node's operator type in one table (op_units.cc).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cumulus/onnx.h"

namespace cumulus::onnx {

struct OpUnit;

// One node, planned: run in order, each reads values by id and writes one.
struct Step {
  const OpUnit* unit = nullptr;
  int version = 0;  // the operator version the model's opset selects (0: unversioned)
  ScanOptions scan;
  SumOptions sum;
  std::vector<int> inputs;
  int output = -1;
  std::string context;  // " (node 'n': x='a', axis='b')", appended to errors raised while running
};

// What a unit sees of a node while the model is checked.
struct NodeCheck {
  const ::onnx::NodeProto& node;
  const std::string& label;               // "'n' (CumSum)", or "#2 (CumSum)" when unnamed
  const std::vector<int>& inputs;         // value ids
  const std::vector<std::string>& names;  // value id -> tensor name
  const std::vector<int32_t>& types;      // value id -> ONNX element type; 0 while unknown
  int64_t opset;
  std::string_view what;  // the model, in errors
};

// What a unit makes of a node.
struct NodePlan {
  int32_t type = 0;                  // the output's ONNX element type; 0 while unknown
  std::shared_ptr<Tensor> constant;  // set when the output is known now: no step runs
  std::vector<std::string> formals;  // the operator's names for the node's inputs
  Step step;                         // the options; the model sets unit, inputs and output
};

// A value while the model runs.
struct Slot {
  std::optional<ConstTensorView> view;
  std::shared_ptr<Tensor> owned;  // null for feeds and constants, which are never written
};

// What a running step sees of the values.
struct StepRun {
  std::vector<Slot>& slots;                  // value id -> value
  const std::vector<std::size_t>& last_use;  // value id -> last step reading it
  std::size_t index;                         // the running step's place in the plan

  // A value read for the last time by this step, and held by nothing else, can take the result.
  bool reusable(int v) const {
    const Slot& slot = slots[v];
    return slot.owned && slot.owned.use_count() == 1 && last_use[v] == index;
  }
};

struct OpUnit {
  std::string_view type;  // NodeProto.op_type
  void (*check)(const NodeCheck& node, NodePlan& plan);
  void (*run)(const Step& step, StepRun& values);  // null when check always makes a constant
};

// Null for an operator cumulus does not run.
const OpUnit* find_unit(std::string_view type) noexcept;
// "CumSum, CumProd, ... and Constant", for errors.
std::string unit_names();

// For the versioned operators' units: the version `op` has at the node's opset.
int node_version(const NodeCheck& node, OpKind op);
// "CumSum-14", naming the operator in errors.
std::string versioned_name(const NodeCheck& node, int version);
// Throws when input k's declared type is not one `op` takes at `version`; an undeclared type is
// checked when the tensor arrives.
void check_input_type(const NodeCheck& node, OpKind op, int version, std::size_t k,
                      std::string_view formal);

}  // namespace cumulus::onnx
