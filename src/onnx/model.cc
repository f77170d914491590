// The ONNX front end: parse a model, check it whole, plan it once, run the plan many times.
#include <onnx/onnx_pb.h>

#include <cstring>
#include <deque>
#include <unordered_map>

#include "core/fail.h"
#include "cumulus/onnx.h"
#include "onnx/op_units.h"
#include "onnx/proto.h"

namespace cumulus::onnx {
namespace {

using detail::fail;

// IR 13 is the newest the CumProd conformance models use; IR 3 introduced opset imports.
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 13;

std::string node_label(const ::onnx::NodeProto& node, int index) {
  return node.name().empty() ? fmt::format("#{} ({})", index, node.op_type())
                             : fmt::format("'{}' ({})", node.name(), node.op_type());
}

std::string dims_string(const ValueInfo& info) {
  std::vector<std::string> parts;
  for (const auto& d : info.dims) parts.push_back(d ? std::to_string(*d) : "?");
  return fmt::format("[{}]", fmt::join(parts, ", "));
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
  void read_versions(const ::onnx::ModelProto& model, std::string_view what);
  void compute_lifetimes();
  const ValueInfo& input(std::string_view name) const;
  std::vector<Tensor> run(const std::map<std::string, ConstTensorView, std::less<>>& feeds) const;
  std::vector<Slot> bind_feeds(
      const std::map<std::string, ConstTensorView, std::less<>>& feeds) const;
  void run_steps(std::vector<Slot>& slots) const;
  std::vector<Tensor> take_outputs(std::vector<Slot>& slots) const;

  struct Loader;
};

// The graph while it is loaded into a model's Impl: one method per pass, in the order load runs
// them.
struct Model::Impl::Loader {
  Loader(Model::Impl& model, const ::onnx::GraphProto& g, std::string_view w)
      : m(model), graph(g), what(w) {}

  Model::Impl& m;
  const ::onnx::GraphProto& graph;
  std::string_view what;

  // Every name is defined once: by a graph input, an initializer or a node output. An
  // initializer may share its name with a graph input, as a default value.
  std::unordered_map<std::string, int> ids;
  std::vector<std::string> defined_by;
  std::vector<int32_t> types;  // value id -> ONNX element type; 0 while unknown
  std::unordered_map<std::string, const ::onnx::TensorProto*> initializers;
  std::map<int, const ::onnx::TensorProto*> initializer_of;  // value id -> initializer
  std::vector<const OpUnit*> node_unit;
  std::vector<int> node_output;
  std::vector<std::vector<int>> node_inputs;
  std::vector<int> order;

  int define(const std::string& name, std::string how, int32_t type);
  ValueInfo value_info(const ::onnx::ValueInfoProto& v, std::string_view role) const;
  void read_initializers();
  void read_inputs();
  void read_nodes();
  void resolve_inputs();
  void order_nodes();
  void check_nodes();
  void read_outputs();
  void convert_initializers();
};

int Model::Impl::Loader::define(const std::string& name, std::string how, int32_t type) {
  if (name.empty()) fail(ErrorCode::kInvalidArgument, "{}: {} has an empty tensor name", what, how);
  if (auto it = ids.find(name); it != ids.end()) {
    fail(ErrorCode::kInvalidArgument, "{}: tensor name '{}' is defined twice: by {} and by {}",
         what, name, defined_by[it->second], how);
  }
  ids.emplace(name, static_cast<int>(m.names.size()));
  m.names.push_back(name);
  defined_by.push_back(std::move(how));
  types.push_back(type);
  return static_cast<int>(m.names.size()) - 1;
}

ValueInfo Model::Impl::Loader::value_info(const ::onnx::ValueInfoProto& v,
                                          std::string_view role) const {
  ValueInfo info;
  info.name = v.name();
  if (v.has_type()) {
    if (!v.type().has_tensor_type()) {
      fail(ErrorCode::kUnsupported, "{}: graph {} '{}' is not a tensor; cumulus runs tensors only",
           what, role, v.name());
    }
    const auto& tt = v.type().tensor_type();
    info.onnx_type = tt.elem_type();
    info.dtype = dtype_from_onnx(info.onnx_type);
    if (tt.has_shape()) {
      info.has_shape = true;
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) {
          if (d.dim_value() < 0) {
            fail(ErrorCode::kInvalidArgument, "{}: graph {} '{}' declares a negative dimension {}",
                 what, role, v.name(), d.dim_value());
          }
          info.dims.emplace_back(d.dim_value());
        } else {
          info.dims.emplace_back(std::nullopt);
        }
      }
    }
  }
  return info;
}

void Model::Impl::Loader::read_initializers() {
  for (const auto& init : graph.initializer()) {
    if (!initializers.emplace(init.name(), &init).second) {
      fail(ErrorCode::kInvalidArgument, "{}: initializer '{}' is defined twice", what, init.name());
    }
    // Also for initializers nothing reads (those are never converted): external data is refused
    // whole, as documented.
    check_no_external_data(init, fmt::format("initializer '{}'", init.name()));
  }
  if (graph.sparse_initializer_size() > 0) {
    fail(ErrorCode::kUnsupported, "{}: sparse initializers are not supported", what);
  }
}

void Model::Impl::Loader::read_inputs() {
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
    m.input_ids.push_back(define(in.name(), fmt::format("graph input '{}'", in.name()), type));
    m.inputs.push_back(std::move(info));
  }
  for (const auto& init : graph.initializer()) {
    const auto it = ids.find(init.name());
    const int id =
        it != ids.end()
            ? it->second
            : define(init.name(), fmt::format("initializer '{}'", init.name()), init.data_type());
    initializer_of.emplace(id, &init);
  }
}

void Model::Impl::Loader::read_nodes() {
  const int num_nodes = graph.node_size();
  node_unit.resize(num_nodes);
  node_output.assign(num_nodes, -1);
  for (int n = 0; n < num_nodes; ++n) {
    const auto& node = graph.node(n);
    const std::string label = node_label(node, n);
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      fail(ErrorCode::kUnsupported, "{}: unknown operator '{}.{}' in node {}", what, node.domain(),
           node.op_type(), label);
    }
    node_unit[n] = find_unit(node.op_type());
    if (!node_unit[n]) {
      fail(ErrorCode::kUnsupported, "{}: unknown operator '{}' in node {}; cumulus runs {}", what,
           node.op_type(), label, unit_names());
    }
    if (node.output_size() != 1) {
      fail(ErrorCode::kInvalidArgument, "{}: node {} must have exactly one output, has {}", what,
           label, node.output_size());
    }
    node_output[n] = define(node.output(0), fmt::format("node {}", label), 0);
  }
}

void Model::Impl::Loader::resolve_inputs() {
  node_inputs.resize(graph.node_size());
  for (int n = 0; n < graph.node_size(); ++n) {
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
}

// Kahn's algorithm: nodes may come in any order; whatever is left over lies on a cycle.
void Model::Impl::Loader::order_nodes() {
  const int num_nodes = graph.node_size();
  std::vector<int> producer(m.names.size(), -1);
  for (int n = 0; n < num_nodes; ++n) producer[node_output[n]] = n;
  std::vector<int> waiting(num_nodes, 0);
  std::vector<std::vector<int>> consumers(m.names.size());
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
}

// Each node in order, through its unit, inferring element types as we go.
void Model::Impl::Loader::check_nodes() {
  m.constants.resize(m.names.size());
  for (int n : order) {
    const std::string label = node_label(graph.node(n), n);
    const auto& ins = node_inputs[n];
    const int out = node_output[n];
    NodePlan plan;
    node_unit[n]->check({graph.node(n), label, ins, m.names, types, m.opset, what}, plan);
    types[out] = plan.type;
    if (plan.constant) {
      m.constants[out] = std::move(plan.constant);
      continue;
    }
    Step& step = plan.step;
    step.unit = node_unit[n];
    step.inputs = ins;
    step.output = out;
    std::vector<std::string> bound;
    for (std::size_t k = 0; k < ins.size(); ++k) {
      bound.push_back(fmt::format("{}='{}'", plan.formals[k], m.names[ins[k]]));
    }
    step.context = fmt::format(" (node {}: {})", label, fmt::join(bound, ", "));
    m.steps.push_back(std::move(step));
  }
}

void Model::Impl::Loader::read_outputs() {
  for (const auto& o : graph.output()) {
    const auto it = ids.find(o.name());
    if (it == ids.end()) {
      fail(ErrorCode::kInvalidArgument,
           "{}: graph output '{}' is not made by any node, graph input or initializer", what,
           o.name());
    }
    ValueInfo info = value_info(o, "output");
    const int32_t inferred = types[it->second];
    if (info.onnx_type != 0 && inferred != 0 && info.onnx_type != inferred) {
      fail(ErrorCode::kInvalidArgument,
           "{}: graph output '{}' is declared {} but is computed as {}", what, o.name(),
           onnx_type_name(info.onnx_type), onnx_type_name(inferred));
    }
    if (info.onnx_type == 0) {
      info.onnx_type = inferred;
      info.dtype = dtype_from_onnx(inferred);
    }
    m.output_ids.push_back(it->second);
    m.outputs.push_back(std::move(info));
  }
}

// Initializers become tensors only when something reads them.
void Model::Impl::Loader::convert_initializers() {
  std::vector<bool> used(m.names.size(), false);
  for (const auto& s : m.steps) {
    for (int v : s.inputs) used[v] = true;
  }
  for (int v : m.output_ids) used[v] = true;
  for (const auto& [v, proto] : initializer_of) {
    if (used[v]) {
      m.constants[v] = std::make_shared<Tensor>(
          tensor_from_proto(*proto, fmt::format("initializer '{}'", m.names[v])));
    }
  }
}

void Model::Impl::load(const ::onnx::ModelProto& model, std::string_view what) {
  read_versions(model, what);
  Loader loader(*this, model.graph(), what);
  loader.read_initializers();
  loader.read_inputs();
  loader.read_nodes();
  loader.resolve_inputs();
  loader.order_nodes();
  loader.check_nodes();
  loader.read_outputs();
  compute_lifetimes();
  loader.convert_initializers();
}

void Model::Impl::read_versions(const ::onnx::ModelProto& model, std::string_view what) {
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
}

void Model::Impl::compute_lifetimes() {
  last_use.assign(names.size(), 0);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    for (int v : steps[s].inputs) last_use[v] = s;
  }
  for (int v : output_ids) last_use[v] = SIZE_MAX;
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
  std::vector<Slot> slots = bind_feeds(feeds);
  run_steps(slots);
  return take_outputs(slots);
}

std::vector<Slot> Model::Impl::bind_feeds(
    const std::map<std::string, ConstTensorView, std::less<>>& feeds) const {
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
  return slots;
}

void Model::Impl::run_steps(std::vector<Slot>& slots) const {
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const Step& step = steps[s];
    StepRun values{slots, last_use, s};
    try {
      step.unit->run(step, values);
    } catch (const Error& e) {
      fail(e.code(), "{}{}", e.what(), step.context);
    }
    for (int v : step.inputs) {
      if (last_use[v] == s) slots[v].owned.reset();
    }
  }
}

std::vector<Tensor> Model::Impl::take_outputs(std::vector<Slot>& slots) const {
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
