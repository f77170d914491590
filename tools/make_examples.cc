// Writes the bundled examples: small ONNX models for the examples on the operator pages, and
// their inputs as .npy files. Usage: make_examples OUTPUT_DIR
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <iostream>
#include <vector>

#include "cumulus/onnx.h"

namespace {

namespace fs = std::filesystem;
using cumulus::DType;
using cumulus::Tensor;

struct Dim {
  int64_t value = -1;  // < 0: symbolic
  const char* param = "";
};

void set_value_info(::onnx::ValueInfoProto* v, const std::string& name, DType dtype,
                    const std::vector<Dim>& dims) {
  v->set_name(name);
  auto* tensor = v->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(cumulus::onnx::onnx_from_dtype(dtype));
  auto* shape = tensor->mutable_shape();
  for (const Dim& d : dims) {
    auto* dim = shape->add_dim();
    if (d.value >= 0) {
      dim->set_dim_value(d.value);
    } else {
      dim->set_dim_param(d.param);
    }
  }
}

::onnx::ModelProto new_model(const std::string& graph_name, int64_t opset) {
  ::onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("cumulus make_examples");
  auto* import = model.add_opset_import();
  import->set_domain("");
  import->set_version(opset);
  model.mutable_graph()->set_name(graph_name);
  return model;
}

void fill_tensor(::onnx::TensorProto* t, const std::string& name, const Tensor& value) {
  t->set_name(name);
  t->set_data_type(cumulus::onnx::onnx_from_dtype(value.dtype()));
  for (int64_t d : value.shape()) t->add_dims(d);
  t->set_raw_data(value.raw(), value.nbytes());
}

// The four attribute combinations of a scan on one input, as the pages' opening example shows.
void add_scan_nodes(::onnx::GraphProto* graph, const std::string& op, DType dtype,
                    const Dim& length) {
  struct Variant {
    const char* suffix;
    int exclusive, reverse;
  };
  for (const Variant& v : {Variant{"", 0, 0}, Variant{"_exclusive", 1, 0},
                           Variant{"_reverse", 0, 1}, Variant{"_reverse_exclusive", 1, 1}}) {
    auto* node = graph->add_node();
    node->set_op_type(op);
    node->set_name(op + v.suffix);
    node->add_input("x");
    node->add_input("axis");
    node->add_output(std::string("y") + v.suffix);
    for (auto [name, value] :
         {std::pair{"exclusive", v.exclusive}, std::pair{"reverse", v.reverse}}) {
      if (value == 0) continue;
      auto* a = node->add_attribute();
      a->set_name(name);
      a->set_type(::onnx::AttributeProto::INT);
      a->set_i(value);
    }
    set_value_info(graph->add_output(), std::string("y") + v.suffix, dtype, {length});
  }
}

void write(const fs::path& path, const std::string& bytes) {
  cumulus::onnx::write_file_atomic(path, bytes);
  std::cout << "wrote " << path.string() << "\n";
}

void write_model(const fs::path& path, const ::onnx::ModelProto& model) {
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    throw std::runtime_error("cannot serialise " + path.string());
  write(path, bytes);
}

template <class T>
void write_npy(const fs::path& path, cumulus::Shape shape, std::vector<T> values) {
  write(path, cumulus::onnx::serialize_npy(Tensor::from_values<T>(std::move(shape), values)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_examples OUTPUT_DIR\n";
    return 2;
  }
  const fs::path out = argv[1];
  try {
    fs::create_directories(out);

    // CumSum-14 over a vector of any length; the axis arrives from a Constant node, as PyTorch
    // exports it.
    {
      auto model = new_model("cumsum", 14);
      auto* graph = model.mutable_graph();
      set_value_info(graph->add_input(), "x", DType::kFloat64, {{-1, "n"}});
      auto* constant = graph->add_node();
      constant->set_op_type("Constant");
      constant->set_name("axis_constant");
      constant->add_output("axis");
      auto* value = constant->add_attribute();
      value->set_name("value");
      value->set_type(::onnx::AttributeProto::TENSOR);
      fill_tensor(value->mutable_t(), "axis", Tensor::scalar<int64_t>(0));
      add_scan_nodes(graph, "CumSum", DType::kFloat64, {-1, "n"});
      write_model(out / "cumsum.onnx", model);
      write_npy<double>(out / "cumsum_x.npy", {5}, {1, 2, 3, 4, 5});
    }
    // CumSum on a matrix, the axis a graph input: run it with --input axis=const:0 or const:-1.
    {
      auto model = new_model("cumsum_axis", 14);
      auto* graph = model.mutable_graph();
      set_value_info(graph->add_input(), "x", DType::kFloat64, {{2}, {3}});
      set_value_info(graph->add_input(), "axis", DType::kInt32, {});
      auto* node = graph->add_node();
      node->set_op_type("CumSum");
      node->add_input("x");
      node->add_input("axis");
      node->add_output("y");
      set_value_info(graph->add_output(), "y", DType::kFloat64, {{2}, {3}});
      write_model(out / "cumsum_axis.onnx", model);
      write_npy<double>(out / "cumsum_axis_x.npy", {2, 3}, {1, 2, 3, 4, 5, 6});
    }
    // CumProd-26, the axis an initializer.
    {
      auto model = new_model("cumprod", 26);
      model.set_ir_version(13);
      auto* graph = model.mutable_graph();
      set_value_info(graph->add_input(), "x", DType::kFloat64, {{3}});
      fill_tensor(graph->add_initializer(), "axis", Tensor::scalar<int32_t>(0));
      add_scan_nodes(graph, "CumProd", DType::kFloat64, {3});
      write_model(out / "cumprod.onnx", model);
      write_npy<double>(out / "cumprod_x.npy", {3}, {1, 2, 3});
    }
    // Sum-13 with broadcasting: a matrix plus a scalar.
    {
      auto model = new_model("sum_broadcast", 13);
      auto* graph = model.mutable_graph();
      set_value_info(graph->add_input(), "data_0", DType::kFloat32, {{2}, {2}});
      set_value_info(graph->add_input(), "data_1", DType::kFloat32, {});
      auto* node = graph->add_node();
      node->set_op_type("Sum");
      node->add_input("data_0");
      node->add_input("data_1");
      node->add_output("sum");
      set_value_info(graph->add_output(), "sum", DType::kFloat32, {{2}, {2}});
      write_model(out / "sum_broadcast.onnx", model);
      write_npy<float>(out / "sum_broadcast_data_0.npy", {2, 2}, {1, 2, 3, 4});
      write_npy<float>(out / "sum_broadcast_data_1.npy", {}, {10});
    }
    // Sum of three vectors, the page's test_cc_sum_example.
    {
      auto model = new_model("sum_three", 13);
      auto* graph = model.mutable_graph();
      auto* node = graph->add_node();
      node->set_op_type("Sum");
      for (const char* name : {"data_0", "data_1", "data_2"}) {
        set_value_info(graph->add_input(), name, DType::kFloat32, {{3}});
        node->add_input(name);
      }
      node->add_output("sum");
      set_value_info(graph->add_output(), "sum", DType::kFloat32, {{3}});
      write_model(out / "sum_three.onnx", model);
      write_npy<float>(out / "sum_three_data_0.npy", {3}, {1, 0, 1});
      write_npy<float>(out / "sum_three_data_1.npy", {3}, {3, 4, 5});
      write_npy<float>(out / "sum_three_data_2.npy", {3}, {6, 0, 5});
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
