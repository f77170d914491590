// The ONNX front end: parse a model, check it whole, plan it once, run the plan many times.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "core/fail.h"
#include "cumulus/onnx.h"
#include "onnx/proto.h"

namespace cumulus::onnx {
namespace {

using detail::fail;

// IR 13 is the newest the CumProd conformance models use; IR 3 introduced opset imports.
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 13;

enum class StepKind { kCumSum, kCumProd, kSum, kIdentity };

struct Step {
  StepKind kind;
  int version = 0;
  ScanOptions scan;
  SumOptions sum;
  std::vector<int> inputs;
  int output = -1;
  std::string context;  // " (node 'n': x='a', axis='b')", appended to errors raised while running
};

std::string node_label(const ::onnx::NodeProto& node, int index) {
  return node.name().empty() ? fmt::format("#{} ({})", index, node.op_type())
                             : fmt::format("'{}' ({})", node.name(), node.op_type());
}

std::string dims_string(const ValueInfo& info) {
  std::vector<std::string> parts;
  for (const auto& d : info.dims) parts.push_back(d ? std::to_string(*d) : "?");
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

int64_t int_attribute(const ::onnx::AttributeProto& a, std::string_view op,
                      const std::string& node) {
  if (a.type() != ::onnx::AttributeProto::INT) {
    fail(ErrorCode::kInvalidArgument, "{}: attribute '{}' must be an int (node {})", op, a.name(),
         node);
  }
  return a.i();
}

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

}  // namespace

struct Model::Impl {
  int64_t ir_version = 0;
  int64_t opset = 0;
  std::vector<ValueInfo> inputs, outputs;
  std::vector<std::string> names;                  // value id -> tensor name
  std::vector<std::shared_ptr<Tensor>> constants;  // value id -> initializer / Constant output
  std::vector<int> input_ids, output_ids;
  std::vector<Step> steps;            // in an order where every input is ready
  std::vector<std::size_t> last_use;  // value id -> last step reading it; SIZE_MAX: a graph output

  void load(const ::onnx::ModelProto& model, std::string_view what);
  const ValueInfo& input(std::string_view name) const;
  std::vector<Tensor> run(const std::map<std::string, ConstTensorView, std::less<>>& feeds) const;
};

void Model::Impl::load(const ::onnx::ModelProto& model, std::string_view what) {
  ir_version = model.ir_version();
  if (ir_version < kMinIrVersion || ir_version > kMaxIrVersion) {
    fail(ErrorCode::kUnsupported, "{}: IR version {} is not supported (cumulus reads {} to {})",
         what, ir_version, kMinIrVersion, kMaxIrVersion);
  }
  bool found = false;
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") {
      if (found)
        fail(ErrorCode::kInvalidArgument, "{}: the default domain is imported twice", what);
      found = true;
      opset = op.version();
    }
  }
  if (!found)
    fail(ErrorCode::kInvalidArgument, "{}: imports no opset of the default ONNX domain", what);
  if (opset < 1 || opset > kMaxOpset) {
    fail(ErrorCode::kUnsupported,
         "{}: opset {} is not supported (cumulus implements opsets 1 to {})", what, opset,
         kMaxOpset);
  }
  const auto& graph = model.graph();

  // Every name is defined once: by a graph input, an initializer or a node output. An
  // initializer may share its name with a graph input, as a default value.
  std::unordered_map<std::string, int> ids;
  std::vector<std::string> defined_by;
  std::vector<int32_t> types;
  auto define = [&](const std::string& name, std::string how, int32_t type) {
    if (name.empty())
      fail(ErrorCode::kInvalidArgument, "{}: {} has an empty tensor name", what, how);
    if (auto it = ids.find(name); it != ids.end()) {
      fail(ErrorCode::kInvalidArgument, "{}: tensor name '{}' is defined twice: by {} and by {}",
           what, name, defined_by[it->second], how);
    }
    ids.emplace(name, static_cast<int>(names.size()));
    names.push_back(name);
    defined_by.push_back(std::move(how));
    types.push_back(type);
    return static_cast<int>(names.size()) - 1;
  };

  std::unordered_map<std::string, const ::onnx::TensorProto*> initializers;
  for (const auto& init : graph.initializer()) {
    if (!initializers.emplace(init.name(), &init).second) {
      fail(ErrorCode::kInvalidArgument, "{}: initializer '{}' is defined twice", what, init.name());
    }
    // Also for initializers nothing reads (those are never converted below): external data is
    // refused whole, as documented.
    check_no_external_data(init, fmt::format("initializer '{}'", init.name()));
  }
  if (graph.sparse_initializer_size() > 0) {
    fail(ErrorCode::kUnsupported, "{}: sparse initializers are not supported", what);
  }

  auto value_info = [&](const ::onnx::ValueInfoProto& v, std::string_view role) {
    ValueInfo info;
    info.name = v.name();
    if (v.has_type()) {
      if (!v.type().has_tensor_type()) {
        fail(ErrorCode::kUnsupported,
             "{}: graph {} '{}' is not a tensor; cumulus runs tensors only", what, role, v.name());
      }
      const auto& tt = v.type().tensor_type();
      info.onnx_type = tt.elem_type();
      info.dtype = dtype_from_onnx(info.onnx_type);
      if (tt.has_shape()) {
        info.has_shape = true;
        for (const auto& d : tt.shape().dim()) {
          if (d.has_dim_value()) {
            if (d.dim_value() < 0) {
              fail(ErrorCode::kInvalidArgument,
                   "{}: graph {} '{}' declares a negative dimension {}", what, role, v.name(),
                   d.dim_value());
            }
            info.dims.emplace_back(d.dim_value());
          } else {
            info.dims.emplace_back(std::nullopt);
          }
        }
      }
    }
    return info;
  };

  for (const auto& in : graph.input()) {
    ValueInfo info = value_info(in, "input");
    const auto init = initializers.find(in.name());
    info.has_default = init != initializers.end();
    const int32_t type = info.has_default ? init->second->data_type() : info.onnx_type;
    if (info.has_default && info.onnx_type != 0 && type != info.onnx_type) {
      fail(ErrorCode::kInvalidArgument,
           "{}: graph input '{}' is declared {} but its initializer is {}", what, in.name(),
           onnx_type_name(info.onnx_type), onnx_type_name(type));
    }
    input_ids.push_back(define(in.name(), fmt::format("graph input '{}'", in.name()), type));
    inputs.push_back(std::move(info));
  }
  std::map<int, const ::onnx::TensorProto*> initializer_of;  // value id -> initializer
  for (const auto& init : graph.initializer()) {
    const auto it = ids.find(init.name());
    const int id =
        it != ids.end()
            ? it->second
            : define(init.name(), fmt::format("initializer '{}'", init.name()), init.data_type());
    initializer_of.emplace(id, &init);
  }

  // Node outputs, then every node input resolved to a defined name.
  const int num_nodes = graph.node_size();
  std::vector<int> node_output(num_nodes, -1);
  std::vector<std::vector<int>> node_inputs(num_nodes);
  for (int n = 0; n < num_nodes; ++n) {
    const auto& node = graph.node(n);
    const std::string label = node_label(node, n);
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      fail(ErrorCode::kUnsupported, "{}: unknown operator '{}.{}' in node {}", what, node.domain(),
           node.op_type(), label);
    }
    static const std::unordered_set<std::string> kKnown = {"CumSum", "CumProd", "Sum", "Identity",
                                                           "Constant"};
    if (!kKnown.contains(node.op_type())) {
      fail(ErrorCode::kUnsupported,
           "{}: unknown operator '{}' in node {}; cumulus runs CumSum, CumProd, Sum, Identity and "
           "Constant",
           what, node.op_type(), label);
    }
    if (node.output_size() != 1) {
      fail(ErrorCode::kInvalidArgument, "{}: node {} must have exactly one output, has {}", what,
           label, node.output_size());
    }
    node_output[n] = define(node.output(0), fmt::format("node {}", label), 0);
  }
  constants.resize(names.size());
  for (int n = 0; n < num_nodes; ++n) {
    const auto& node = graph.node(n);
    for (const auto& in : node.input()) {
      const auto it = ids.find(in);
      if (it == ids.end()) {
        fail(ErrorCode::kInvalidArgument,
             "{}: node {} reads tensor '{}', which no graph input, initializer or node defines",
             what, node_label(node, n), in);
      }
      node_inputs[n].push_back(it->second);
    }
  }

  // Kahn's algorithm: nodes may come in any order; whatever is left over lies on a cycle.
  std::vector<int> producer(names.size(), -1);
  for (int n = 0; n < num_nodes; ++n) producer[node_output[n]] = n;
  std::vector<int> waiting(num_nodes, 0);
  std::vector<std::vector<int>> consumers(names.size());
  std::deque<int> ready;
  for (int n = 0; n < num_nodes; ++n) {
    for (int v : node_inputs[n]) {
      if (producer[v] >= 0) {
        ++waiting[n];
        consumers[v].push_back(n);
      }
    }
    if (waiting[n] == 0) ready.push_back(n);
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int n = ready.front();
    ready.pop_front();
    order.push_back(n);
    for (int c : consumers[node_output[n]]) {
      if (--waiting[c] == 0) ready.push_back(c);
    }
  }
  if (static_cast<int>(order.size()) != num_nodes) {
    std::vector<std::string> stuck;
    for (int n = 0; n < num_nodes; ++n) {
      if (waiting[n] > 0) stuck.push_back(node_label(graph.node(n), n));
    }
    fail(ErrorCode::kInvalidArgument, "{}: the graph has a cycle through node {}", what,
         fmt::join(stuck, ", "));
  }

  // Check each node in order, inferring element types as we go.
  auto type_of = [&](int v) { return types[v]; };
  for (int n : order) {
    const auto& node = graph.node(n);
    const std::string label = node_label(node, n);
    const auto& ins = node_inputs[n];
    const int out = node_output[n];
    const std::string& type = node.op_type();
    if (type == "Constant") {
      if (!ins.empty())
        fail(ErrorCode::kInvalidArgument, "Constant: node {} takes no inputs", label);
      auto value = std::make_shared<Tensor>(constant_value(node, label));
      types[out] = onnx_from_dtype(value->dtype());
      constants[out] = std::move(value);
      continue;
    }
    Step step;
    step.inputs = ins;
    step.output = out;
    std::vector<std::string> formals;
    if (type == "Identity") {
      step.kind = StepKind::kIdentity;
      if (ins.size() != 1) {
        fail(ErrorCode::kInvalidArgument, "Identity: node {} needs 1 input, has {}", label,
             ins.size());
      }
      if (node.attribute_size() > 0) {
        fail(ErrorCode::kInvalidArgument, "Identity: unknown attribute '{}' (node {})",
             node.attribute(0).name(), label);
      }
      formals = {"input"};
    } else {
      const OpKind op = type == "CumSum"    ? OpKind::kCumSum
                        : type == "CumProd" ? OpKind::kCumProd
                                            : OpKind::kSum;
      step.kind = op == OpKind::kCumSum    ? StepKind::kCumSum
                  : op == OpKind::kCumProd ? StepKind::kCumProd
                                           : StepKind::kSum;
      try {
        step.version = op_version(op, opset);
      } catch (const Error& e) {
        fail(e.code(), "{}: node {}: {}", what, label, e.what());
      }
      const std::string versioned = fmt::format("{}-{}", type, step.version);
      auto check_type = [&](std::size_t k, std::string_view formal) {
        const int32_t t = type_of(ins[k]);
        if (t == 0) return;  // undeclared: checked when the tensor arrives
        const auto allowed = allowed_dtypes(op, step.version);
        const auto d = dtype_from_onnx(t);
        if (d && std::find(allowed.begin(), allowed.end(), *d) != allowed.end()) return;
        std::vector<std::string_view> list;
        for (DType a : allowed) list.push_back(dtype_name(a));
        fail(ErrorCode::kInvalidArgument,
             "{}: type {} is not supported (allowed: {}); input '{}' is tensor '{}' in node {}",
             versioned, onnx_type_name(t), fmt::join(list, ", "), formal, names[ins[k]], label);
      };
      if (op == OpKind::kSum) {
        if (ins.empty())
          fail(ErrorCode::kInvalidArgument, "{}: node {} needs at least one input", versioned,
               label);
        for (std::size_t k = 0; k < ins.size(); ++k) {
          formals.push_back(fmt::format("data_{}", k));
          check_type(k, formals.back());
          if (type_of(ins[k]) != 0 && type_of(ins[0]) != 0 && type_of(ins[k]) != type_of(ins[0])) {
            fail(ErrorCode::kInvalidArgument,
                 "{}: input 'data_{}' has type {} but input 'data_0' has type {}; all inputs must "
                 "have one type (node {})",
                 versioned, k, onnx_type_name(type_of(ins[k])), onnx_type_name(type_of(ins[0])),
                 label);
          }
        }
        for (const auto& a : node.attribute()) {
          if (a.name() == "consumed_inputs" && step.version == 1) continue;  // legacy, ignored
          fail(ErrorCode::kInvalidArgument, "{}: unknown attribute '{}' (node {})", versioned,
               a.name(), label);
        }
        step.sum.broadcast = step.version >= 8;
      } else {
        if (ins.size() != 2) {
          fail(ErrorCode::kInvalidArgument, "{}: node {} needs 2 inputs (x, axis), has {}",
               versioned, label, ins.size());
        }
        formals = {"x", "axis"};
        check_type(0, "x");
        const int32_t axis_type = type_of(ins[1]);
        const std::optional<DType> axis_dtype = dtype_from_onnx(axis_type);
        if (axis_type != 0 && !(axis_dtype && is_axis_dtype(*axis_dtype))) {
          fail(ErrorCode::kInvalidArgument,
               "{}: input 'axis' must be int32 or int64, not {} (tensor '{}' in node {})",
               versioned, onnx_type_name(axis_type), names[ins[1]], label);
        }
        for (const auto& a : node.attribute()) {
          if (a.name() != "exclusive" && a.name() != "reverse") {
            fail(ErrorCode::kInvalidArgument, "{}: unknown attribute '{}' (node {})", versioned,
                 a.name(), label);
          }
          const int64_t v = int_attribute(a, versioned, label);
          if (v != 0 && v != 1) {
            fail(ErrorCode::kInvalidArgument, "{}: attribute '{}' must be 0 or 1, not {} (node {})",
                 versioned, a.name(), v, label);
          }
          (a.name() == "exclusive" ? step.scan.exclusive : step.scan.reverse) = v == 1;
        }
      }
    }
    types[out] = type_of(ins[0]);
    std::vector<std::string> bound;
    for (std::size_t k = 0; k < ins.size(); ++k) {
      bound.push_back(fmt::format("{}='{}'", formals[k], names[ins[k]]));
    }
    step.context = fmt::format(" (node {}: {})", label, fmt::join(bound, ", "));
    steps.push_back(std::move(step));
  }

  for (const auto& o : graph.output()) {
    const auto it = ids.find(o.name());
    if (it == ids.end()) {
      fail(ErrorCode::kInvalidArgument,
           "{}: graph output '{}' is not made by any node, graph input or initializer", what,
           o.name());
    }
    ValueInfo info = value_info(o, "output");
    const int32_t inferred = type_of(it->second);
    if (info.onnx_type != 0 && inferred != 0 && info.onnx_type != inferred) {
      fail(ErrorCode::kInvalidArgument,
           "{}: graph output '{}' is declared {} but is computed as {}", what, o.name(),
           onnx_type_name(info.onnx_type), onnx_type_name(inferred));
    }
    if (info.onnx_type == 0) {
      info.onnx_type = inferred;
      info.dtype = dtype_from_onnx(inferred);
    }
    output_ids.push_back(it->second);
    outputs.push_back(std::move(info));
  }

  last_use.assign(names.size(), 0);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    for (int v : steps[s].inputs) last_use[v] = s;
  }
  for (int v : output_ids) last_use[v] = SIZE_MAX;

  // Initializers become tensors only when something reads them.
  std::vector<bool> used(names.size(), false);
  for (const auto& s : steps) {
    for (int v : s.inputs) used[v] = true;
  }
  for (int v : output_ids) used[v] = true;
  for (const auto& [v, proto] : initializer_of) {
    if (used[v]) {
      constants[v] = std::make_shared<Tensor>(
          tensor_from_proto(*proto, fmt::format("initializer '{}'", names[v])));
    }
  }
}

const ValueInfo& Model::Impl::input(std::string_view name) const {
  for (const auto& in : inputs) {
    if (in.name == name) return in;
  }
  std::vector<std::string_view> known;
  for (const auto& in : inputs) known.push_back(in.name);
  fail(ErrorCode::kInvalidArgument, "unknown input '{}'; the model's inputs are: {}", name,
       fmt::join(known, ", "));
}

std::vector<Tensor> Model::Impl::run(
    const std::map<std::string, ConstTensorView, std::less<>>& feeds) const {
  struct Slot {
    std::optional<ConstTensorView> view;
    std::shared_ptr<Tensor> owned;  // null for feeds and constants, which are never written
  };
  std::vector<Slot> slots(names.size());
  for (std::size_t v = 0; v < names.size(); ++v) {
    if (constants[v]) slots[v].view = constants[v]->view();
  }
  for (const auto& [name, view] : feeds) {
    const ValueInfo& in = input(name);
    if (in.onnx_type != 0 && onnx_from_dtype(view.dtype) != in.onnx_type) {
      fail(ErrorCode::kInvalidArgument, "input '{}' is declared {} but was given {}", name,
           onnx_type_name(in.onnx_type), dtype_name(view.dtype));
    }
    try {
      element_count(view.shape);
    } catch (const Error& e) {
      fail(e.code(), "input '{}': {}", name, e.what());
    }
    bool matches = !in.has_shape || in.dims.size() == view.shape.size();
    for (std::size_t d = 0; matches && in.has_shape && d < view.shape.size(); ++d) {
      matches = !in.dims[d] || *in.dims[d] == view.shape[d];
    }
    if (!matches) {
      fail(ErrorCode::kInvalidArgument, "input '{}' has shape {} but the model declares {}", name,
           shape_string(view.shape), dims_string(in));
    }
    slots[input_ids[&in - inputs.data()]].view = view;
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!slots[input_ids[i]].view) {
      const auto& in = inputs[i];
      fail(ErrorCode::kInvalidArgument, "missing input '{}' ({}, shape {})", in.name,
           in.onnx_type != 0 ? onnx_type_name(in.onnx_type) : "any type",
           in.has_shape ? dims_string(in) : "any");
    }
  }

  // A value read for the last time by a step, and held by nothing else, can take the result.
  auto reusable = [&](int v, std::size_t s) {
    const Slot& slot = slots[v];
    return slot.owned && slot.owned.use_count() == 1 && last_use[v] == s;
  };
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const Step& step = steps[s];
    Slot& out = slots[step.output];
    const Slot& first = slots[step.inputs[0]];
    try {
      switch (step.kind) {
        case StepKind::kIdentity:
          out = first;
          break;
        case StepKind::kCumSum:
        case StepKind::kCumProd: {
          const OpKind op = step.kind == StepKind::kCumSum ? OpKind::kCumSum : OpKind::kCumProd;
          const int64_t axis = scan_axis(op, *slots[step.inputs[1]].view);
          const ConstTensorView x = *first.view;
          check_dtype(op, step.version, x.dtype);
          out.owned =
              reusable(step.inputs[0], s)
                  ? first.owned
                  : std::make_shared<Tensor>(x.dtype, Shape(x.shape.begin(), x.shape.end()));
          if (op == OpKind::kCumSum) {
            cumsum(x, axis, out.owned->view(), step.scan);
          } else {
            cumprod(x, axis, out.owned->view(), step.scan);
          }
          out.view = out.owned->view();
          break;
        }
        case StepKind::kSum: {
          std::vector<ConstTensorView> views;
          for (int v : step.inputs) views.push_back(*slots[v].view);
          check_dtype(OpKind::kSum, step.version, views[0].dtype);
          const Shape shape = sum_shape(views, step.sum);
          std::shared_ptr<Tensor> target;
          for (int v : step.inputs) {
            if (reusable(v, s) && slots[v].owned->shape() == shape) {
              target = slots[v].owned;
              break;
            }
          }
          if (!target) target = std::make_shared<Tensor>(views[0].dtype, shape);
          sum(views, target->view(), step.sum);
          out.owned = std::move(target);
          out.view = out.owned->view();
          break;
        }
      }
    } catch (const Error& e) {
      fail(e.code(), "{}{}", e.what(), step.context);
    }
    for (int v : step.inputs) {
      if (last_use[v] == s) {
        slots[v].owned.reset();
      }
    }
  }

  std::vector<Tensor> results;
  for (int v : output_ids) {
    Slot& slot = slots[v];
    if (slot.owned && slot.owned.use_count() == 1) {
      results.push_back(std::move(*slot.owned));
      slot.owned.reset();
    } else {
      const ConstTensorView view = *slot.view;
      Tensor copy(view.dtype, Shape(view.shape.begin(), view.shape.end()));
      if (copy.nbytes() != 0) std::memcpy(copy.raw(), view.data, copy.nbytes());
      results.push_back(std::move(copy));
    }
  }
  return results;
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::parse(std::span<const std::byte> bytes, std::string_view what) {
  check_protobuf_size(bytes.size(), what);
  ::onnx::ModelProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    fail(ErrorCode::kParse, "{}: not a valid ONNX model (the protobuf does not parse)", what);
  }
  auto impl = std::make_unique<Impl>();
  impl->load(proto, what);
  return Model(std::move(impl));
}

Model Model::load(const std::filesystem::path& path) {
  const std::string what = fmt::format("model '{}'", path.string());
  const std::string bytes = read_protobuf_file(path, what);
  return parse(std::as_bytes(std::span(bytes)), what);
}

int64_t Model::ir_version() const noexcept { return impl_->ir_version; }
int64_t Model::opset() const noexcept { return impl_->opset; }
const std::vector<ValueInfo>& Model::inputs() const noexcept { return impl_->inputs; }
const std::vector<ValueInfo>& Model::outputs() const noexcept { return impl_->outputs; }
const ValueInfo& Model::input(std::string_view name) const { return impl_->input(name); }
std::vector<Tensor> Model::run(
    const std::map<std::string, ConstTensorView, std::less<>>& feeds) const {
  return impl_->run(feeds);
}

}  // namespace cumulus::onnx
