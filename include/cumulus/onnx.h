// cumulus: the ONNX front end (models and tensor files). Built on the ops in ops.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cumulus/ops.h"
#include "cumulus/tensor.h"

namespace cumulus::onnx {

// ONNX TensorProto.DataType <-> DType. Names use ONNX's spelling of every type ("int8",
// "string", "float8e4m3fn"), so messages can name types cumulus does not run.
std::optional<DType> dtype_from_onnx(int32_t onnx_type) noexcept;
int32_t onnx_from_dtype(DType dtype) noexcept;
std::string onnx_type_name(int32_t onnx_type);

// ---- Operator versions -------------------------------------------------------------------------

// The version of `op` in force under an opset import of the default domain ("CumSum" at opset 13
// is CumSum-11). Throws when the operator does not exist at that opset or the opset is newer than
// the newest cumulus knows (kMaxOpset).
inline constexpr int64_t kMaxOpset = 26;
int op_version(OpKind op, int64_t opset);
// The element types `op` accepts at `version` (a value op_version returns).
std::span<const DType> allowed_dtypes(OpKind op, int version);
// Throws "CumSum-11: type float16 is not supported (allowed: ...)" for a type outside the list.
void check_dtype(OpKind op, int version, DType dtype);

// ---- Tensor files -------------------------------------------------------------------------------
// Every size in a file is checked against the bytes really present before anything is allocated.

// ONNX TensorProto: raw_data or the typed fields; external data is refused. `name` receives the
// tensor's name when given.
Tensor parse_tensor_proto(std::span<const std::byte> bytes, std::string* name = nullptr);
std::string serialize_tensor_proto(ConstTensorView tensor, std::string_view name);
// NumPy .npy, versions 1.0-3.0, little endian, C order. bfloat16 has no .npy form.
Tensor parse_npy(std::span<const std::byte> bytes);
std::string serialize_npy(ConstTensorView tensor);

// A shape as NumPy writes it (in .npy headers, and as the operator pages print it): "()", "(5,)",
// "(2, 3)".
std::string shape_tuple(std::span<const int64_t> shape);

// Reads `.npy` or `.pb` by extension.
Tensor read_tensor_file(const std::filesystem::path& path, std::string* name = nullptr);
std::string read_file(const std::filesystem::path& path);
// Writes through a temporary file in the same folder and a rename: on any failure the target is
// left as it was and the temporary is removed.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// ---- Models -------------------------------------------------------------------------------------

struct ValueInfo {
  std::string name;
  int32_t onnx_type = 0;                     // 0 when the model does not declare it
  std::optional<DType> dtype;                // set when cumulus can run the type
  bool has_shape = false;                    // false: any rank
  std::vector<std::optional<int64_t>> dims;  // nullopt: symbolic or unknown dimension
  bool has_default = false;                  // an initializer gives it a value when it is not fed
};

class Model {
 public:
  // Parses, checks and plans: unknown operators, cycles, undefined or duplicate names, operator
  // versions and types are all rejected here, with errors that name them.
  static Model load(const std::filesystem::path& path);
  static Model parse(std::span<const std::byte> bytes, std::string_view what = "model");

  int64_t ir_version() const noexcept;
  int64_t opset() const noexcept;                          // of the default domain
  const std::vector<ValueInfo>& inputs() const noexcept;   // graph inputs, in order
  const std::vector<ValueInfo>& outputs() const noexcept;  // graph outputs, in order
  // The graph input called `name`; throws, listing the inputs, when there is none.
  const ValueInfo& input(std::string_view name) const;

  // Feeds are checked against the declared types and static dimensions; unknown names and
  // missing inputs are errors. Returns the graph outputs in order.
  std::vector<Tensor> run(const std::map<std::string, ConstTensorView, std::less<>>& feeds) const;

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cumulus::onnx
