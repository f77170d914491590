// The operator x opset x type matrix, through the ONNX front end, against the tables of the
// operator pages (written out here, not taken from the library). Prints the matrix it verified.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>

#include "cumulus/onnx.h"
#include "error_of.h"
#include "model_builder.h"

namespace cumulus::onnx {
namespace {

using model_builder::ModelBuilder;
using ::testing::HasSubstr;

// Every ONNX element type the test offers each operator: the eight cumulus runs and some it
// must refuse.
struct TypeCase {
  int32_t onnx;
  const char* name;
};
constexpr TypeCase kTypes[] = {
    {::onnx::TensorProto::FLOAT, "float32"},   {::onnx::TensorProto::DOUBLE, "float64"},
    {::onnx::TensorProto::FLOAT16, "float16"}, {::onnx::TensorProto::BFLOAT16, "bfloat16"},
    {::onnx::TensorProto::INT32, "int32"},     {::onnx::TensorProto::INT64, "int64"},
    {::onnx::TensorProto::UINT32, "uint32"},   {::onnx::TensorProto::UINT64, "uint64"},
    {::onnx::TensorProto::INT8, "int8"},       {::onnx::TensorProto::UINT8, "uint8"},
    {::onnx::TensorProto::INT16, "int16"},     {::onnx::TensorProto::BOOL, "bool"},
};

struct Expectation {
  int version = 0;  // 0: the operator does not exist at this opset
  std::set<std::string> types;
};

// From the operator pages: CumSum since 11 (14 adds float16, bfloat16), CumProd since 26, Sum
// versions 1, 6, 8 (broadcasting) and 13 (adds bfloat16).
Expectation expected(const std::string& op, int opset) {
  const std::set<std::string> cumsum11 = {"float32", "float64", "int32",
                                          "int64",   "uint32",  "uint64"};
  std::set<std::string> all8 = cumsum11;
  all8.insert({"float16", "bfloat16"});
  const std::set<std::string> sum_floats = {"float16", "float32", "float64"};
  if (op == "CumSum") {
    if (opset < 11) return {};
    return opset >= 14 ? Expectation{14, all8} : Expectation{11, cumsum11};
  }
  if (op == "CumProd") return opset >= 26 ? Expectation{26, all8} : Expectation{};
  std::set<std::string> sum13 = sum_floats;
  sum13.insert("bfloat16");
  if (opset >= 13) return {13, sum13};
  return {opset >= 8 ? 8 : opset >= 6 ? 6 : 1, sum_floats};
}

// Element values 1, 2, 3 in the ONNX type's bytes.
std::string one_two_three(int32_t onnx) {
  std::string raw;
  auto put = [&](auto v) { raw.append(reinterpret_cast<const char*>(&v), sizeof v); };
  for (int i = 1; i <= 3; ++i) {
    switch (onnx) {
      case ::onnx::TensorProto::FLOAT:
        put(static_cast<float>(i));
        break;
      case ::onnx::TensorProto::DOUBLE:
        put(static_cast<double>(i));
        break;
      case ::onnx::TensorProto::FLOAT16:
        put(static_cast<uint16_t>(i == 1 ? 0x3C00 : i == 2 ? 0x4000 : 0x4200));
        break;
      case ::onnx::TensorProto::BFLOAT16:
        put(static_cast<uint16_t>(i == 1 ? 0x3F80 : i == 2 ? 0x4000 : 0x4040));
        break;
      case ::onnx::TensorProto::INT32:
        put(static_cast<int32_t>(i));
        break;
      case ::onnx::TensorProto::INT64:
        put(static_cast<int64_t>(i));
        break;
      case ::onnx::TensorProto::UINT32:
        put(static_cast<uint32_t>(i));
        break;
      default:
        put(static_cast<uint64_t>(i));
        break;
    }
  }
  return raw;
}

double value_at(const Tensor& t, int64_t i) {
  return visit_dtype(t.dtype(), [&]<class T>(T) -> double {
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      return to_float(t.data<T>()[i]);
    } else {
      return static_cast<double>(t.data<T>()[i]);
    }
  });
}

TEST(VersionMatrix, EveryOperatorOpsetAndType) {
  std::map<std::string, std::map<std::string, std::string>> verified;  // "op-version" -> rows
  for (const std::string op : {"CumSum", "CumProd", "Sum"}) {
    for (int opset = 1; opset <= 26; ++opset) {
      const Expectation want = expected(op, opset);
      for (const TypeCase& type : kTypes) {
        SCOPED_TRACE(op + " at opset " + std::to_string(opset) + ", " + type.name);
        ModelBuilder b(opset, opset >= 26 ? 13 : 8);
        b.input("x", type.onnx, std::vector<model_builder::Dim>{3});
        ::onnx::TensorProto data;
        data.set_name("x");
        data.set_data_type(type.onnx);
        data.add_dims(3);
        if (op == "Sum") {
          b.node("Sum", {"x", "x"}, {"y"});
        } else {
          b.initializer(model_builder::scalar_proto<int64_t>("axis", 0));
          b.node(op, {"x", "axis"}, {"y"});
        }
        b.output("y");
        const std::string bytes = b.bytes();
        const auto load = [&] { return Model::parse(std::as_bytes(std::span(bytes))); };
        if (want.version == 0) {
          try {
            load();
            ADD_FAILURE() << "loaded, but the operator does not exist at this opset";
          } catch (const Error& e) {
            EXPECT_THAT(e.what(),
                        HasSubstr(op + " does not exist at opset " + std::to_string(opset)));
          }
          continue;
        }
        const std::string versioned = op + "-" + std::to_string(want.version);
        if (!want.types.contains(type.name)) {
          try {
            load();
            ADD_FAILURE() << "loaded a type the version does not allow";
          } catch (const Error& e) {
            EXPECT_THAT(e.what(),
                        HasSubstr(versioned + ": type " + type.name + " is not supported"));
          }
          continue;
        }
        const Model model = load();
        const std::string raw = one_two_three(type.onnx);
        const Shape shape = {3};
        const auto dtype = dtype_from_name(type.name);
        ASSERT_TRUE(dtype.has_value());
        const std::vector<Tensor> out =
            model.run({{"x", ConstTensorView(*dtype, shape, raw.data())}});
        ASSERT_EQ(out.size(), 1u);
        ASSERT_EQ(out[0].dtype(), *dtype);
        const std::vector<double> expect = op == "CumSum"    ? std::vector<double>{1, 3, 6}
                                           : op == "CumProd" ? std::vector<double>{1, 2, 6}
                                                             : std::vector<double>{2, 4, 6};
        for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(value_at(out[0], i), expect[i]);
        auto& row = verified[versioned];
        row[type.name] = "runs";
        const std::string opsets = row["opsets"];
        row["opsets"] = opsets.empty()
                            ? std::to_string(opset)
                            : opsets.substr(0, opsets.find('-')) + "-" + std::to_string(opset);
      }
    }
  }
  // The verified matrix, for the record.
  std::cout << "| operator-version | opsets | types that load and run |\n|---|---|---|\n";
  for (const auto& [versioned, row] : verified) {
    std::string types;
    for (const TypeCase& t : kTypes) {
      if (row.contains(t.name)) types += std::string(types.empty() ? "" : ", ") + t.name;
    }
    std::cout << "| " << versioned << " | " << row.at("opsets") << " | " << types << " |\n";
  }
  EXPECT_EQ(verified.size(), 7u);  // CumSum-11, -14, CumProd-26, Sum-1, -6, -8, -13
}

TEST(VersionMatrix, SumBroadcastsFromVersion8) {
  for (int opset = 1; opset <= 26; ++opset) {
    SCOPED_TRACE("Sum at opset " + std::to_string(opset));
    ModelBuilder b(opset);
    b.input("a", ::onnx::TensorProto::FLOAT, std::vector<model_builder::Dim>{2, 2});
    b.input("b", ::onnx::TensorProto::FLOAT, std::vector<model_builder::Dim>{2});
    b.node("Sum", {"a", "b"}, {"y"});
    b.output("y");
    const std::string bytes = b.bytes();
    const Model model = Model::parse(std::as_bytes(std::span(bytes)));
    const std::vector<float> a = {1, 2, 3, 4}, row = {10, 20};
    const Shape sa = {2, 2}, sb = {2};
    const std::map<std::string, ConstTensorView, std::less<>> feeds = {
        {"a", ConstTensorView(DType::kFloat32, sa, a.data())},
        {"b", ConstTensorView(DType::kFloat32, sb, row.data())}};
    if (opset < 8) {
      try {
        model.run(feeds);
        ADD_FAILURE() << "Sum broadcast before opset 8";
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("do not broadcast"));
      }
      continue;
    }
    const std::vector<Tensor> out = model.run(feeds);
    const std::vector<float> want = {11, 22, 13, 24};
    EXPECT_EQ(std::vector<float>(out[0].values<float>().begin(), out[0].values<float>().end()),
              want);
  }
}

TEST(VersionErrors, OperatorsAndOpsets) {
  EXPECT_EQ(op_version(OpKind::kCumSum, 11), 11);
  EXPECT_EQ(op_version(OpKind::kCumSum, 13), 11);
  EXPECT_EQ(op_version(OpKind::kCumSum, 14), 14);
  EXPECT_EQ(op_version(OpKind::kCumProd, 26), 26);
  EXPECT_EQ(op_version(OpKind::kSum, 5), 1);
  EXPECT_EQ(op_version(OpKind::kSum, 7), 6);
  EXPECT_EQ(op_version(OpKind::kSum, 12), 8);
  EXPECT_EQ(op_version(OpKind::kSum, 26), 13);
  EXPECT_THAT(error_of([] { op_version(OpKind::kCumProd, 25); }),
              HasSubstr("CumProd does not exist at opset 25 (it was added in opset 26)"));
  EXPECT_THAT(error_of([] { op_version(OpKind::kCumSum, 10); }),
              HasSubstr("CumSum does not exist at opset 10 (it was added in opset 11)"));
  EXPECT_THAT(error_of([] { op_version(OpKind::kSum, 27); }, ErrorCode::kUnsupported),
              HasSubstr("Sum: opset 27 is newer than cumulus knows"));
}

TEST(VersionErrors, TypesPerVersion) {
  EXPECT_THAT(
      error_of([] { check_dtype(OpKind::kCumSum, 11, DType::kFloat16); }),
      HasSubstr("CumSum-11: type float16 is not supported (allowed: float32, float64, int32, "
                "int64, uint32, uint64)"));
  EXPECT_THAT(
      error_of([] { check_dtype(OpKind::kSum, 8, DType::kBFloat16); }),
      HasSubstr("Sum-8: type bfloat16 is not supported (allowed: float16, float32, float64)"));
  EXPECT_THAT(error_of([] { check_dtype(OpKind::kSum, 13, DType::kInt32); }),
              HasSubstr("Sum-13: type int32 is not supported"));
  for (DType t : kAllDTypes) {
    EXPECT_NO_THROW(check_dtype(OpKind::kCumSum, 14, t));
    EXPECT_NO_THROW(check_dtype(OpKind::kCumProd, 26, t));
  }
  EXPECT_NO_THROW(check_dtype(OpKind::kSum, 13, DType::kBFloat16));
  EXPECT_NO_THROW(check_dtype(OpKind::kSum, 1, DType::kFloat16));
}

}  // namespace
}  // namespace cumulus::onnx
