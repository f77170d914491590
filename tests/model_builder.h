// Builds ONNX models in code with the official protobuf classes, for the model and CLI tests.
#pragma once

#include <onnx/onnx_pb.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "cumulus/dtype.h"

namespace model_builder {

namespace fs = std::filesystem;

// ONNX TensorProto.DataType numbers, spelled out so tests read like the spec.
inline constexpr int32_t kFloat = ::onnx::TensorProto::FLOAT;
inline constexpr int32_t kDouble = ::onnx::TensorProto::DOUBLE;
inline constexpr int32_t kFloat16 = ::onnx::TensorProto::FLOAT16;
inline constexpr int32_t kBFloat16 = ::onnx::TensorProto::BFLOAT16;
inline constexpr int32_t kInt8 = ::onnx::TensorProto::INT8;
inline constexpr int32_t kInt32 = ::onnx::TensorProto::INT32;
inline constexpr int32_t kInt64 = ::onnx::TensorProto::INT64;
inline constexpr int32_t kUInt32 = ::onnx::TensorProto::UINT32;
inline constexpr int32_t kUInt64 = ::onnx::TensorProto::UINT64;

// The ONNX type number of a C++ element type, without asking the library.
template <class T>
constexpr int32_t elem_type_of() {
  if constexpr (std::is_same_v<T, float>) return kFloat;
  if constexpr (std::is_same_v<T, double>) return kDouble;
  if constexpr (std::is_same_v<T, cumulus::Float16>) return kFloat16;
  if constexpr (std::is_same_v<T, cumulus::BFloat16>) return kBFloat16;
  if constexpr (std::is_same_v<T, int8_t>) return kInt8;
  if constexpr (std::is_same_v<T, int32_t>) return kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return kInt64;
  if constexpr (std::is_same_v<T, uint32_t>) return kUInt32;
  if constexpr (std::is_same_v<T, uint64_t>) return kUInt64;
}

// A declared dimension: a number, or a symbol made with Dim::param.
struct Dim {
  Dim(int64_t v) : value(v) {}  // NOLINT(google-explicit-constructor)
  static Dim param(std::string name) {
    Dim d(0);
    d.value.reset();
    d.symbol = std::move(name);
    return d;
  }
  std::optional<int64_t> value;
  std::string symbol;
};

// A TensorProto holding `values` little endian in raw_data.
template <class T>
::onnx::TensorProto tensor_proto(const std::string& name, const std::vector<int64_t>& dims,
                                 const std::vector<T>& values) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(elem_type_of<T>());
  for (int64_t d : dims) t.add_dims(d);
  std::string raw(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(raw.data(), values.data(), raw.size());
  t.set_raw_data(raw);
  return t;
}

template <class T>
::onnx::TensorProto scalar_proto(const std::string& name, T value) {
  return tensor_proto<T>(name, {}, {value});
}

inline ::onnx::AttributeProto& add_attribute(::onnx::NodeProto& node, const std::string& name,
                                             ::onnx::AttributeProto::AttributeType type) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(type);
  return *a;
}
inline void set_int(::onnx::NodeProto& node, const std::string& name, int64_t v) {
  add_attribute(node, name, ::onnx::AttributeProto::INT).set_i(v);
}
inline void set_ints(::onnx::NodeProto& node, const std::string& name,
                     const std::vector<int64_t>& v) {
  auto& a = add_attribute(node, name, ::onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
}
inline void set_float(::onnx::NodeProto& node, const std::string& name, float v) {
  add_attribute(node, name, ::onnx::AttributeProto::FLOAT).set_f(v);
}
inline void set_floats(::onnx::NodeProto& node, const std::string& name,
                       const std::vector<float>& v) {
  auto& a = add_attribute(node, name, ::onnx::AttributeProto::FLOATS);
  for (float x : v) a.add_floats(x);
}
inline void set_tensor(::onnx::NodeProto& node, const std::string& name,
                       const ::onnx::TensorProto& t) {
  *add_attribute(node, name, ::onnx::AttributeProto::TENSOR).mutable_t() = t;
}

class ModelBuilder {
 public:
  // One default-domain opset import ("" domain).
  explicit ModelBuilder(int64_t opset, int64_t ir_version = 8) {
    model_.set_ir_version(ir_version);
    model_.set_producer_name("cumulus tests");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  // A graph input of tensor type; no dims: no shape at all (any rank). Type 0: no type at all.
  ModelBuilder& input(const std::string& name, int32_t elem_type,
                      std::optional<std::vector<Dim>> dims = std::nullopt) {
    value_info(graph().add_input(), name, elem_type, dims);
    return *this;
  }
  ModelBuilder& output(const std::string& name, int32_t elem_type = 0,
                       std::optional<std::vector<Dim>> dims = std::nullopt) {
    value_info(graph().add_output(), name, elem_type, dims);
    return *this;
  }
  ModelBuilder& initializer(const ::onnx::TensorProto& t) {
    *graph().add_initializer() = t;
    return *this;
  }
  ::onnx::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op_type);
    if (!name.empty()) n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }
  // A Constant node with a `value` tensor attribute.
  ::onnx::NodeProto& constant(const std::string& output, const ::onnx::TensorProto& value) {
    auto& n = node("Constant", {}, {output});
    set_tensor(n, "value", value);
    return n;
  }

  ::onnx::GraphProto& graph() { return *model_.mutable_graph(); }
  ::onnx::ModelProto& proto() { return model_; }

  std::string bytes() const {
    std::string out;
    if (!model_.SerializeToString(&out)) throw std::runtime_error("cannot serialise the model");
    return out;
  }
  void write(const fs::path& path) const { write_bytes(path, bytes()); }

  static void write_bytes(const fs::path& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f.good()) throw std::runtime_error("cannot write " + path.string());
  }

 private:
  static void value_info(::onnx::ValueInfoProto* v, const std::string& name, int32_t elem_type,
                         const std::optional<std::vector<Dim>>& dims) {
    v->set_name(name);
    if (elem_type == 0 && !dims) return;
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    if (!dims) return;
    auto* shape = tt->mutable_shape();
    for (const Dim& d : *dims) {
      auto* dim = shape->add_dim();
      if (d.value) {
        dim->set_dim_value(*d.value);
      } else {
        dim->set_dim_param(d.symbol);
      }
    }
  }

  ::onnx::ModelProto model_;
};

// A fresh folder under the system temp folder, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "cumulus-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

}  // namespace model_builder
