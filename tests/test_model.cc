// The ONNX model front end: loading, version and type rules, graph checks, feeds and running
// whole graphs, against a naive reference computed here.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cumulus/error.h"
#include "cumulus/onnx.h"
#include "model_builder.h"
#include "untouched.h"

namespace cumulus::onnx {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace model_builder;

using Feeds = std::map<std::string, ConstTensorView, std::less<>>;

// ---- Helpers ------------------------------------------------------------------------------------

Model load(const ModelBuilder& b) {
  const std::string bytes = b.bytes();
  return Model::parse(std::as_bytes(std::span(bytes)));
}

// The message of the cumulus::Error `f` throws; a test failure for anything else.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than cumulus::Error: " << e.what();
    return "<not a cumulus::Error>";
  }
  ADD_FAILURE() << "did not throw";
  return "<no error>";
}

template <class F>
ErrorCode code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "did not throw a cumulus::Error";
  return ErrorCode::kInvalidArgument;
}

#define EXPECT_CUMULUS_ERROR(statement, ...) \
  EXPECT_THAT(error_of([&] { (void)(statement); }), AllOf(__VA_ARGS__))

template <class T>
Tensor make(const Shape& shape, const std::vector<T>& values) {
  return Tensor::from_values<T>(shape, std::span<const T>(values));
}
template <class T>
Tensor scalar_of(T v) {
  return Tensor::scalar<T>(v);
}

template <class T>
std::vector<T> values_of(const Tensor& t) {
  EXPECT_EQ(t.dtype(), dtype_of<T>);
  if (t.dtype() != dtype_of<T>) return {};
  return std::vector<T>(t.values<T>().begin(), t.values<T>().end());
}

template <class T>
std::vector<T> iota_values(std::size_t n, T start = T(1)) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + static_cast<T>(i));
  return v;
}

std::string bytes_of(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw()), t.nbytes());
}

// Exact small integers as half-precision bit patterns, built from float32's fields here rather
// than with the library's conversions.
Float16 half_of(int n) {
  if (n == 0) return Float16{0};
  const auto bits = std::bit_cast<uint32_t>(static_cast<float>(n));
  const uint32_t sign = (bits >> 31) << 15;
  const uint32_t exponent = ((bits >> 23) & 0xff) - 127 + 15;
  const uint32_t mantissa = (bits & 0x7fffff) >> 13;
  return Float16{static_cast<uint16_t>(sign | (exponent << 10) | mantissa)};
}
BFloat16 bhalf_of(int n) {
  return BFloat16{static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(n)) >> 16)};
}

// ---- Naive reference: multi-index loops, long double or exact unsigned integers ----------------

int64_t count_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape strides_of(const Shape& shape) {
  Shape s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// y[j] = op over x[k], k running over the scan window of j, computed from scratch for every j.
template <class T>
std::vector<T> ref_scan(const std::vector<T>& x, const Shape& shape, int64_t axis, bool exclusive,
                        bool reverse, bool product) {
  const auto rank = static_cast<int64_t>(shape.size());
  if (axis < 0) axis += rank;
  const Shape strides = strides_of(shape);
  const int64_t n = shape[static_cast<std::size_t>(axis)];
  const int64_t stride = strides[static_cast<std::size_t>(axis)];
  std::vector<T> y(x.size());
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    const int64_t j = (i / stride) % n;
    const int64_t base = i - j * stride;
    if constexpr (std::is_integral_v<T>) {
      uint64_t acc = product ? 1 : 0;
      for (int64_t k = 0; k < n; ++k) {
        const bool in = reverse ? (exclusive ? k > j : k >= j) : (exclusive ? k < j : k <= j);
        if (!in) continue;
        const auto v = static_cast<uint64_t>(x[static_cast<std::size_t>(base + k * stride)]);
        acc = product ? acc * v : acc + v;
      }
      y[static_cast<std::size_t>(i)] = static_cast<T>(acc);
    } else {
      long double acc = product ? 1.0L : 0.0L;
      for (int64_t k = 0; k < n; ++k) {
        const bool in = reverse ? (exclusive ? k > j : k >= j) : (exclusive ? k < j : k <= j);
        if (!in) continue;
        const long double v = x[static_cast<std::size_t>(base + k * stride)];
        acc = product ? acc * v : acc + v;
      }
      y[static_cast<std::size_t>(i)] = static_cast<T>(acc);
    }
  }
  return y;
}

// NumPy broadcasting, written out.
Shape broadcast(const std::vector<Shape>& shapes) {
  std::size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    for (std::size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      if (o == 1) o = s[i];
    }
  }
  return out;
}

template <class T>
std::vector<T> ref_sum(const std::vector<std::vector<T>>& inputs,
                       const std::vector<Shape>& shapes) {
  const Shape out = broadcast(shapes);
  const int64_t count = count_of(out);
  std::vector<T> y(static_cast<std::size_t>(count));
  Shape index(out.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i;
    for (std::size_t d = out.size(); d-- > 0;) {
      index[d] = rest % out[d];
      rest /= out[d];
    }
    long double acc = 0;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const Shape& s = shapes[k];
      int64_t flat = 0;
      for (std::size_t d = 0; d < s.size(); ++d) {
        const int64_t idx = s[d] == 1 ? 0 : index[out.size() - s.size() + d];
        flat = flat * s[d] + idx;
      }
      acc += static_cast<long double>(inputs[k][static_cast<std::size_t>(flat)]);
    }
    y[static_cast<std::size_t>(i)] = static_cast<T>(acc);
  }
  return y;
}

// ---- Common models ------------------------------------------------------------------------------

// y = Op(x, axis) with x of `x_type` and any shape.
ModelBuilder scan_model(int64_t opset, int32_t x_type, const std::string& op = "CumSum",
                        int32_t axis_type = kInt64) {
  ModelBuilder b(opset);
  b.input("x", x_type).input("axis", axis_type).output("y");
  b.node(op, {"x", "axis"}, {"y"}, "scan");
  return b;
}

ModelBuilder sum_model(int64_t opset, int32_t type, int inputs = 2) {
  ModelBuilder b(opset);
  std::vector<std::string> names;
  for (int k = 0; k < inputs; ++k) {
    names.push_back("d" + std::to_string(k));
    b.input(names.back(), type);
  }
  b.output("s");
  b.node("Sum", names, {"s"}, "add");
  return b;
}

// ---- Loading and versions -----------------------------------------------------------------------

TEST(ModelLoad, IrVersions3To13Load) {
  for (int64_t ir = 3; ir <= 13; ++ir) {
    SCOPED_TRACE(ir);
    ModelBuilder b(14, ir);
    b.input("x", kFloat).input("axis", kInt64).output("y");
    b.node("CumSum", {"x", "axis"}, {"y"});
    const Model m = load(b);
    EXPECT_EQ(m.ir_version(), ir);
    EXPECT_EQ(m.opset(), 14);
  }
  for (int64_t ir : {0, 2, 14, 100}) {
    ModelBuilder b(14, ir);
    b.input("x", kFloat).output("x");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr(fmt::format("IR version {}", ir)));
  }
}

TEST(ModelLoad, OpsetImports) {
  {
    ModelBuilder b(14);
    b.proto().mutable_opset_import(0)->set_domain("ai.onnx");
    b.input("x", kFloat).input("axis", kInt64).output("y");
    b.node("CumSum", {"x", "axis"}, {"y"});
    EXPECT_EQ(load(b).opset(), 14);
  }
  {
    // Another domain's import alongside is fine as long as no node uses it.
    ModelBuilder b(14);
    auto* other = b.proto().add_opset_import();
    other->set_domain("com.microsoft");
    other->set_version(1);
    b.input("x", kFloat).output("x");
    EXPECT_EQ(load(b).opset(), 14);
  }
  {
    // A node may spell the default domain out too.
    ModelBuilder b(14);
    b.input("x", kFloat).input("axis", kInt64).output("y");
    b.node("CumSum", {"x", "axis"}, {"y"}).set_domain("ai.onnx");
    EXPECT_NO_THROW(load(b));
  }
  {
    ModelBuilder b(14);
    b.proto().clear_opset_import();
    b.input("x", kFloat).output("x");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("imports no opset of the default ONNX domain"));
  }
  {
    ModelBuilder b(14);
    auto* again = b.proto().add_opset_import();
    again->set_domain("ai.onnx");
    again->set_version(13);
    b.input("x", kFloat).output("x");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("imported twice"));
  }
  for (int64_t opset : {0, 27, 1000}) {
    ModelBuilder b(opset);
    b.input("x", kFloat).output("x");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr(fmt::format("opset {} is not supported", opset)));
  }
}

TEST(ModelLoad, CumSumVersionFollowsOpset) {
  const std::vector<int64_t> shape = {2, 2};
  const auto axis = scalar_of<int64_t>(1);
  for (int64_t opset = 11; opset <= 26; ++opset) {
    SCOPED_TRACE(opset);
    const int version = opset >= 14 ? 14 : 11;
    // float32 runs at every version.
    const Model m32 = load(scan_model(opset, kFloat));
    const Tensor x32 = make<float>(shape, {1, 2, 3, 4});
    EXPECT_EQ(values_of<float>(m32.run({{"x", x32}, {"axis", axis}})[0]),
              (std::vector<float>{1, 3, 3, 7}));
    for (int32_t half : {kFloat16, kBFloat16}) {
      if (version == 11) {
        EXPECT_CUMULUS_ERROR(load(scan_model(opset, half)), HasSubstr("CumSum-11"),
                             HasSubstr(half == kFloat16 ? "type float16" : "type bfloat16"),
                             HasSubstr("'x'"));
      } else {
        EXPECT_NO_THROW(load(scan_model(opset, half)));
      }
    }
  }
  const Model m = load(scan_model(14, kFloat16));
  const Tensor x = make<Float16>(shape, {half_of(1), half_of(2), half_of(3), half_of(-4)});
  const auto y = values_of<Float16>(m.run({{"x", x}, {"axis", axis}})[0]);
  EXPECT_EQ(y, (std::vector<Float16>{half_of(1), half_of(3), half_of(3), half_of(-1)}));
  for (int64_t opset : {1, 10}) {
    EXPECT_CUMULUS_ERROR(load(scan_model(opset, kFloat)),
                         HasSubstr("CumSum does not exist at opset"),
                         HasSubstr(std::to_string(opset)));
  }
}

TEST(ModelLoad, UndeclaredTypeIsCheckedAgainstTheVersionWhenFed) {
  const Model m = load(scan_model(13, 0));
  const Tensor x = make<Float16>({2}, {half_of(1), half_of(2)});
  const auto axis = scalar_of<int64_t>(0);
  EXPECT_CUMULUS_ERROR(m.run({{"x", x}, {"axis", axis}}), HasSubstr("CumSum-11"),
                       HasSubstr("float16"));
  const Tensor x64 = make<double>({2}, {1, 2});
  EXPECT_EQ(values_of<double>(m.run({{"x", x64}, {"axis", axis}})[0]), (std::vector<double>{1, 3}));
}

TEST(ModelLoad, CumProdExistsFromOpset26) {
  for (int64_t opset : {11, 14, 25}) {
    EXPECT_CUMULUS_ERROR(load(scan_model(opset, kDouble, "CumProd")), HasSubstr("CumProd"),
                         HasSubstr(fmt::format("opset {}", opset)), HasSubstr("node 'scan'"));
  }
  const Model m = load(scan_model(26, kInt32, "CumProd"));
  const Tensor x = make<int32_t>({4}, {1, 2, 3, 4});
  const auto axis = scalar_of<int64_t>(0);
  EXPECT_EQ(values_of<int32_t>(m.run({{"x", x}, {"axis", axis}})[0]),
            (std::vector<int32_t>{1, 2, 6, 24}));
  EXPECT_CUMULUS_ERROR(load(scan_model(26, kInt8, "CumProd")), HasSubstr("CumProd-26"),
                       HasSubstr("int8"));
}

TEST(ModelLoad, SumVersionsAndTypes) {
  // The version named in the type error tells which one is in force.
  for (int64_t opset = 1; opset <= 26; ++opset) {
    SCOPED_TRACE(opset);
    const int version = opset >= 13 ? 13 : opset >= 8 ? 8 : opset >= 6 ? 6 : 1;
    EXPECT_CUMULUS_ERROR(load(sum_model(opset, kInt32)), HasSubstr(fmt::format("Sum-{}", version)),
                         HasSubstr("int32"));
    if (version < 13) {
      EXPECT_CUMULUS_ERROR(load(sum_model(opset, kBFloat16)),
                           HasSubstr(fmt::format("Sum-{}: type bfloat16", version)));
    } else {
      EXPECT_NO_THROW(load(sum_model(opset, kBFloat16)));
    }
    const Model m = load(sum_model(opset, kDouble));
    const Tensor a = make<double>({2, 3}, {1, 2, 3, 4, 5, 6});
    const Tensor row = make<double>({3}, {10, 20, 30});
    if (version >= 8) {
      EXPECT_EQ(values_of<double>(m.run({{"d0", a}, {"d1", row}})[0]),
                (std::vector<double>{11, 22, 33, 14, 25, 36}));
    } else {
      EXPECT_CUMULUS_ERROR(m.run({{"d0", a}, {"d1", row}}), HasSubstr("do not broadcast"),
                           HasSubstr("[3]"), HasSubstr("[2, 3]"));
      const Tensor b = make<double>({2, 3}, {1, 1, 1, 1, 1, 1});
      EXPECT_EQ(values_of<double>(m.run({{"d0", a}, {"d1", b}})[0]),
                (std::vector<double>{2, 3, 4, 5, 6, 7}));
    }
  }
  const Model sum8 = load(sum_model(8, kFloat));
  const Tensor a23 = make<float>({2, 3}, iota_values<float>(6));
  const Tensor a2 = make<float>({2}, {1, 2});
  EXPECT_CUMULUS_ERROR(sum8.run({{"d0", a23}, {"d1", a2}}), HasSubstr("cannot be broadcast"),
                       HasSubstr("[2]"), HasSubstr("[2, 3]"), HasSubstr("node 'add'"));
  const Model m = load(sum_model(13, kBFloat16, 3));
  const Tensor a = make<BFloat16>({2}, {bhalf_of(1), bhalf_of(-8)});
  const Tensor b = make<BFloat16>({2}, {bhalf_of(2), bhalf_of(3)});
  const Tensor c = make<BFloat16>({1}, {bhalf_of(4)});
  EXPECT_EQ(values_of<BFloat16>(m.run({{"d0", a}, {"d1", b}, {"d2", c}})[0]),
            (std::vector<BFloat16>{bhalf_of(7), bhalf_of(-1)}));
}

TEST(ModelLoad, Sum1ConsumedInputsIsIgnored) {
  for (int64_t opset : {1, 5}) {
    ModelBuilder b = sum_model(opset, kFloat);
    set_ints(*b.graph().mutable_node(0), "consumed_inputs", {0, 1});
    const Model m = load(b);
    const Tensor a = make<float>({2}, {1, 2});
    EXPECT_EQ(values_of<float>(m.run({{"d0", a}, {"d1", a}})[0]), (std::vector<float>{2, 4}));
  }
  for (int64_t opset : {6, 8, 13}) {
    ModelBuilder b = sum_model(opset, kFloat);
    set_ints(*b.graph().mutable_node(0), "consumed_inputs", {0, 1});
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("unknown attribute 'consumed_inputs'"));
  }
  ModelBuilder b = sum_model(5, kFloat);
  set_int(*b.graph().mutable_node(0), "broadcast", 1);
  EXPECT_CUMULUS_ERROR(load(b), HasSubstr("Sum-1"), HasSubstr("unknown attribute 'broadcast'"));
}

TEST(ModelLoad, TypesOutsideTheListAreErrors) {
  EXPECT_CUMULUS_ERROR(load(scan_model(13, kFloat16)), HasSubstr("CumSum-11"),
                       HasSubstr("float16"));
  EXPECT_CUMULUS_ERROR(load(scan_model(14, kInt8)), HasSubstr("CumSum-14"), HasSubstr("int8"));
  EXPECT_CUMULUS_ERROR(load(scan_model(26, ::onnx::TensorProto::BOOL)), HasSubstr("CumSum-14"),
                       HasSubstr("bool"));
  EXPECT_CUMULUS_ERROR(load(sum_model(8, kBFloat16)), HasSubstr("Sum-8"), HasSubstr("bfloat16"));
  EXPECT_CUMULUS_ERROR(load(sum_model(13, kInt64)), HasSubstr("Sum-13"), HasSubstr("int64"));
  EXPECT_CUMULUS_ERROR(load(scan_model(14, kFloat, "CumSum", kFloat)), HasSubstr("CumSum-14"),
                       HasSubstr("'axis' must be int32 or int64, not float32"));
  EXPECT_CUMULUS_ERROR(load(scan_model(14, kFloat, "CumSum", kUInt32)),
                       HasSubstr("must be int32 or int64, not uint32"));
  {
    ModelBuilder b(13);
    b.input("a", kFloat).input("b", kDouble).output("s");
    b.node("Sum", {"a", "b"}, {"s"});
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("Sum-13"), HasSubstr("'data_1' has type float64"),
                         HasSubstr("float32"));
  }
  {
    // A type from an initializer is checked as well.
    ModelBuilder b(13);
    b.output("y");
    b.initializer(tensor_proto<Float16>("x", {1}, {half_of(1)}));
    b.initializer(scalar_proto<int64_t>("axis", 0));
    b.node("CumSum", {"x", "axis"}, {"y"});
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("CumSum-11"), HasSubstr("float16"));
  }
  {
    // And one from a Constant node.
    ModelBuilder b(13);
    b.input("axis", kInt64).output("y");
    b.constant("x", tensor_proto<Float16>("", {1}, {half_of(1)}));
    b.node("CumSum", {"x", "axis"}, {"y"});
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("CumSum-11"), HasSubstr("float16"));
  }
}

// ---- Graphs -------------------------------------------------------------------------------------

TEST(ModelGraph, NodesInAnyOrderRunAsAGraph) {
  // t = Sum(a, b) ; s = CumSum(t, 1, exclusive) ; p = CumProd(s, 0, reverse) ; out = Sum(p, s, c)
  // listed last to first.
  ModelBuilder b(26);
  b.input("a", kDouble, std::vector<Dim>{2, 3}).input("b", kDouble, std::vector<Dim>{3});
  b.output("out", kDouble).output("s");
  b.initializer(tensor_proto<double>("c", {1}, {0.5}));
  b.node("Sum", {"p", "s", "c"}, {"out"}, "last");
  auto& prod = b.node("CumProd", {"s", "axis0"}, {"p"}, "prod");
  set_int(prod, "reverse", 1);
  auto& scan = b.node("CumSum", {"t", "axis1"}, {"s"}, "scan");
  set_int(scan, "exclusive", 1);
  b.node("Sum", {"a", "b"}, {"t"}, "first");
  set_int(b.node("Constant", {}, {"axis0"}), "value_int", 0);
  b.constant("axis1", scalar_proto<int32_t>("", 1));
  const Model m = load(b);

  const std::vector<double> a = {1, 2, 3, 4, 5, 6}, row = {-1, 0, 2};
  const Tensor ta = make<double>({2, 3}, a), tb = make<double>({3}, row);
  const auto out = m.run({{"a", ta}, {"b", tb}});
  ASSERT_EQ(out.size(), 2u);

  const auto t = ref_sum<double>({a, row}, {{2, 3}, {3}});
  const auto s = ref_scan<double>(t, {2, 3}, 1, true, false, false);
  const auto p = ref_scan<double>(s, {2, 3}, 0, false, true, true);
  EXPECT_EQ(values_of<double>(out[0]), ref_sum<double>({p, s, {0.5}}, {{2, 3}, {2, 3}, {1}}));
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<double>(out[1]), s);
  EXPECT_EQ(values_of<double>(out[1]), (std::vector<double>{0, 0, 2, 0, 3, 8}));
}

TEST(ModelGraph, LongChainsInShuffledOrder) {
  // v0 = x; v{k+1} = CumSum(v{k}), CumProd(v{k}) or Identity(v{k}): 60 nodes listed in a random
  // order. int64 keeps every step exact (wrapping around), so the reference matches bit for bit.
  std::mt19937 rng(2024);
  const Shape shape = {3, 2};
  const std::vector<int64_t> x = {1, -1, 2, 1, 3, -2};
  ModelBuilder b(26);
  b.input("x", kInt64, std::vector<Dim>{3, 2}).output("v60").output("v30");
  b.initializer(scalar_proto<int64_t>("a0", 0));
  b.initializer(scalar_proto<int32_t>("a1", -1));
  std::vector<::onnx::NodeProto> nodes;
  std::vector<int64_t> want = x, want30;
  for (int k = 0; k < 60; ++k) {
    const std::string in = k == 0 ? "x" : "v" + std::to_string(k);
    const std::string out = "v" + std::to_string(k + 1);
    const int kind = static_cast<int>(rng() % 3);
    const bool exclusive = rng() % 2 == 1, reverse = rng() % 2 == 1;
    ::onnx::NodeProto n;
    n.add_output(out);
    n.add_input(in);
    if (kind == 2) {
      n.set_op_type("Identity");
    } else {
      n.set_op_type(kind == 0 ? "CumSum" : "CumProd");
      n.add_input(k % 2 == 0 ? "a0" : "a1");
      set_int(n, "exclusive", exclusive);
      set_int(n, "reverse", reverse);
      want = ref_scan<int64_t>(want, shape, k % 2 == 0 ? 0 : 1, exclusive, reverse, kind == 1);
    }
    if (k + 1 == 30) want30 = want;
    nodes.push_back(std::move(n));
  }
  std::shuffle(nodes.begin(), nodes.end(), rng);
  for (auto& n : nodes) *b.graph().add_node() = std::move(n);
  const Model m = load(b);
  const Tensor tx = make<int64_t>(shape, x);
  const auto out = m.run({{"x", tx}});
  EXPECT_EQ(values_of<int64_t>(out[0]), want);
  EXPECT_EQ(values_of<int64_t>(out[1]), want30);
  EXPECT_EQ(values_of<int64_t>(tx), x);
  // A moved model runs the same.
  Model moved = load(b);
  Model other = std::move(moved);
  EXPECT_EQ(values_of<int64_t>(other.run({{"x", tx}})[0]), want);
}

TEST(ModelGraph, SumOfOneInputIsTheInput) {
  ModelBuilder b(13);
  b.input("x", kFloat).output("y").output("z");
  b.initializer(scalar_proto<int64_t>("axis", 0));
  b.node("Sum", {"x"}, {"y"});
  b.node("CumSum", {"x", "axis"}, {"t"});
  b.node("Sum", {"t"}, {"z"});
  const Model m = load(b);
  const std::vector<float> x = {3, -1, 2.5f};
  const Tensor tx = make<float>({3}, x);
  const auto out = m.run({{"x", tx}});
  EXPECT_EQ(values_of<float>(out[0]), x);
  EXPECT_EQ(values_of<float>(out[1]), (std::vector<float>{3, 2, 4.5f}));
}

TEST(ModelGraph, ConstantNodeForms) {
  // PyTorch exports the axis as a Constant node feeding CumSum.
  ModelBuilder b(14);
  b.input("x", kFloat, std::vector<Dim>{2, 3});
  b.output("by_tensor")
      .output("by_int")
      .output("by_ints")
      .output("plus_float")
      .output("plus_floats");
  b.constant("/Constant_output_0", scalar_proto<int64_t>("", 1)).set_name("/Constant");
  b.node("CumSum", {"x", "/Constant_output_0"}, {"by_tensor"}, "/CumSum");
  set_int(b.node("Constant", {}, {"k_int"}), "value_int", -2);
  b.node("CumSum", {"x", "k_int"}, {"by_int"});
  set_ints(b.node("Constant", {}, {"k_ints"}), "value_ints", {1});
  b.node("CumSum", {"x", "k_ints"}, {"by_ints"});
  set_float(b.node("Constant", {}, {"f"}), "value_float", 0.5f);
  b.node("Sum", {"x", "f"}, {"plus_float"});
  set_floats(b.node("Constant", {}, {"fs"}), "value_floats", {10, 20, 30});
  b.node("Sum", {"x", "fs"}, {"plus_floats"});
  const Model m = load(b);

  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const Tensor tx = make<float>({2, 3}, x);
  const auto out = m.run({{"x", tx}});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(values_of<float>(out[0]), ref_scan<float>(x, {2, 3}, 1, false, false, false));
  EXPECT_EQ(values_of<float>(out[1]), ref_scan<float>(x, {2, 3}, 0, false, false, false));
  EXPECT_EQ(values_of<float>(out[2]), ref_scan<float>(x, {2, 3}, 1, false, false, false));
  EXPECT_EQ(values_of<float>(out[3]), ref_sum<float>({x, {0.5f}}, {{2, 3}, {}}));
  EXPECT_EQ(values_of<float>(out[4]), ref_sum<float>({x, {10, 20, 30}}, {{2, 3}, {3}}));
  for (const auto& t : out) EXPECT_EQ(t.shape(), (Shape{2, 3}));
}

TEST(ModelGraph, ConstantNodeErrors) {
  {
    ModelBuilder b(14);
    b.output("k");
    b.node("Constant", {}, {"k"}, "empty");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("Constant"), HasSubstr("'empty'"),
                         HasSubstr("exactly one value attribute"));
  }
  {
    ModelBuilder b(14);
    b.output("k");
    auto& n = b.node("Constant", {}, {"k"}, "str");
    add_attribute(n, "value_string", ::onnx::AttributeProto::STRING).set_s("hi");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("'value_string'"), HasSubstr("'str'"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("k");
    set_int(b.node("Constant", {"x"}, {"k"}, "fed"), "value_int", 1);
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("Constant"), HasSubstr("takes no inputs"));
  }
}

TEST(ModelGraph, InitializersAndDefaultInputs) {
  // "x" is a graph input with an initializer: a default value that a feed overrides. "axis" is a
  // plain initializer.
  ModelBuilder b(14);
  b.input("x", kInt64, std::vector<Dim>{3}).output("y");
  b.initializer(tensor_proto<int64_t>("x", {3}, {1, 2, 3}));
  b.initializer(scalar_proto<int64_t>("axis", 0));
  b.node("CumSum", {"x", "axis"}, {"y"});
  const Model m = load(b);
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].name, "x");
  EXPECT_TRUE(m.inputs()[0].has_default);
  EXPECT_EQ(values_of<int64_t>(m.run({})[0]), (std::vector<int64_t>{1, 3, 6}));
  const Tensor x = make<int64_t>({3}, {10, 20, 30});
  EXPECT_EQ(values_of<int64_t>(m.run({{"x", x}})[0]), (std::vector<int64_t>{10, 30, 60}));
  // The default is still the default after being overridden.
  EXPECT_EQ(values_of<int64_t>(m.run({})[0]), (std::vector<int64_t>{1, 3, 6}));
  // The initializer that is not a graph input cannot be fed.
  const auto axis = scalar_of<int64_t>(0);
  EXPECT_CUMULUS_ERROR(m.run({{"axis", axis}}), HasSubstr("unknown input 'axis'"));
}

TEST(ModelGraph, OutputsThatAreInputsOrInitializers) {
  ModelBuilder b(14);
  b.input("x", kFloat, std::vector<Dim>{2}).output("x").output("w").output("y").output("y");
  b.initializer(tensor_proto<float>("w", {2}, {7, 8}));
  b.initializer(scalar_proto<int32_t>("axis", 0));
  b.node("CumSum", {"x", "axis"}, {"y"});
  const Model m = load(b);
  ASSERT_EQ(m.outputs().size(), 4u);
  EXPECT_EQ(m.outputs()[1].onnx_type, kFloat);  // inferred from the initializer
  const std::vector<float> x = {1.5f, 2};
  const Tensor tx = make<float>({2}, x);
  for (int repeat = 0; repeat < 2; ++repeat) {
    const auto out = m.run({{"x", tx}});
    ASSERT_EQ(out.size(), 4u);
    EXPECT_EQ(values_of<float>(out[0]), x);
    EXPECT_NE(out[0].raw(), tx.raw()) << "outputs are the caller's own tensors";
    EXPECT_EQ(values_of<float>(out[1]), (std::vector<float>{7, 8}));
    EXPECT_EQ(values_of<float>(out[2]), (std::vector<float>{1.5f, 3.5f}));
    EXPECT_EQ(values_of<float>(out[3]), (std::vector<float>{1.5f, 3.5f}));
    EXPECT_EQ(out[2].shape(), (Shape{2}));
    EXPECT_EQ(out[3].shape(), (Shape{2}));
  }
}

TEST(ModelGraph, SameTensorUsedTwice) {
  ModelBuilder b(14);
  b.input("a", kDouble).output("twice").output("thrice");
  b.initializer(scalar_proto<int64_t>("axis", -1));
  b.node("Sum", {"a", "a"}, {"twice"});
  b.node("CumSum", {"a", "axis"}, {"t"});
  b.node("Sum", {"t", "t", "t"}, {"thrice"});
  const Model m = load(b);
  const std::vector<double> a = {1, -2, 3, 4.25};
  const Tensor ta = make<double>({2, 2}, a);
  const auto out = m.run({{"a", ta}});
  EXPECT_EQ(values_of<double>(out[0]), ref_sum<double>({a, a}, {{2, 2}, {2, 2}}));
  const auto t = ref_scan<double>(a, {2, 2}, 1, false, false, false);
  EXPECT_EQ(values_of<double>(out[1]), ref_sum<double>({t, t, t}, {{2, 2}, {2, 2}, {2, 2}}));
  EXPECT_EQ(values_of<double>(ta), a);
}

TEST(ModelGraph, ChainsThatReuseBuffersKeepFeedsAndOutputsIntact) {
  // t1 and t2 can be computed in place along the chain; x, t1 (a graph output) and the Identity
  // alias of the feed must come out unchanged.
  ModelBuilder b(26);
  b.input("x", kFloat, std::vector<Dim>{3, 4}).input("axis", kInt64, std::vector<Dim>{});
  b.output("t1").output("t3").output("t5").output("alias").output("t7").output("t7_alias");
  b.node("CumSum", {"x", "axis"}, {"t1"});
  b.node("CumSum", {"t1", "axis"}, {"t2"});
  b.node("Sum", {"t2", "x"}, {"t3"});
  b.node("Identity", {"x"}, {"alias"});
  b.node("CumProd", {"alias", "axis"}, {"t4"});
  b.node("Sum", {"t4", "t4"}, {"t5"});
  // t6 has two names; the scan of t6 must not write over t7_alias.
  b.node("Sum", {"t1", "x"}, {"t6"});
  b.node("Identity", {"t6"}, {"t7_alias"});
  b.node("CumSum", {"t6", "axis"}, {"t7"});
  const Model m = load(b);

  const std::vector<float> x = {1, 2, -1, 0.5f, 3, 1, 1, -2, 0, 2, 1, 1};
  const Tensor tx = make<float>({3, 4}, x);
  const std::string x_before = bytes_of(tx);
  for (int64_t axis_value : {0, 1, -1}) {
    SCOPED_TRACE(axis_value);
    const Tensor axis = scalar_of<int64_t>(axis_value);
    const auto out = m.run({{"x", tx}, {"axis", axis}});
    ASSERT_EQ(out.size(), 6u);
    const Shape s = {3, 4};
    const auto t1 = ref_scan<float>(x, s, axis_value, false, false, false);
    const auto t2 = ref_scan<float>(t1, s, axis_value, false, false, false);
    const auto t4 = ref_scan<float>(x, s, axis_value, false, false, true);
    const auto t6 = ref_sum<float>({t1, x}, {s, s});
    EXPECT_EQ(values_of<float>(out[0]), t1);
    EXPECT_EQ(values_of<float>(out[1]), ref_sum<float>({t2, x}, {s, s}));
    EXPECT_EQ(values_of<float>(out[2]), ref_sum<float>({t4, t4}, {s, s}));
    EXPECT_EQ(values_of<float>(out[3]), x);
    EXPECT_EQ(values_of<float>(out[4]), ref_scan<float>(t6, s, axis_value, false, false, false));
    EXPECT_EQ(values_of<float>(out[5]), t6);
    EXPECT_EQ(bytes_of(tx), x_before) << "a feed was written to";
    EXPECT_EQ(*axis.data<int64_t>(), axis_value);
  }
}

TEST(ModelGraph, InitializersAreNotWrittenByInPlaceSteps) {
  // Identity of an initializer, then a chain: running twice gives the same answer.
  ModelBuilder b(14);
  b.output("y");
  b.initializer(tensor_proto<int32_t>("w", {4}, {1, 2, 3, 4}));
  b.initializer(scalar_proto<int32_t>("axis", 0));
  b.node("Identity", {"w"}, {"u"});
  b.node("CumSum", {"u", "axis"}, {"v"});
  b.node("CumSum", {"v", "axis"}, {"y"});
  const Model m = load(b);
  const std::vector<int32_t> want = {1, 4, 10, 20};
  EXPECT_EQ(values_of<int32_t>(m.run({})[0]), want);
  EXPECT_EQ(values_of<int32_t>(m.run({})[0]), want);
}

TEST(ModelGraph, RunsConcurrentlyFromManyThreads) {
  // run() is const: one model, several threads, each with its own feeds, large enough for the
  // kernels to use their thread pool.
  ModelBuilder b(14);
  b.input("x", kFloat).output("y");
  b.initializer(scalar_proto<int64_t>("axis", 1));
  b.node("CumSum", {"x", "axis"}, {"t"});
  b.node("CumSum", {"t", "axis"}, {"y"});
  const Model m = load(b);
  const Shape shape = {2048, 64};
  std::vector<std::vector<float>> inputs, wants;
  for (int k = 0; k < 4; ++k) {
    std::vector<float> x(static_cast<std::size_t>(count_of(shape)));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7 + k) % 5) - 2;
    wants.push_back(ref_scan<float>(ref_scan<float>(x, shape, 1, false, false, false), shape, 1,
                                    false, false, false));
    inputs.push_back(std::move(x));
  }
  std::vector<std::vector<float>> got(inputs.size());
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    threads.emplace_back([&, k] {
      const Tensor x = make<float>(shape, inputs[k]);
      for (int repeat = 0; repeat < 3; ++repeat) {
        const auto y = m.run({{"x", x}});
        got[k] = std::vector<float>(y[0].values<float>().begin(), y[0].values<float>().end());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t k = 0; k < inputs.size(); ++k) EXPECT_TRUE(got[k] == wants[k]) << k;
}

// ---- Axis and attributes ------------------------------------------------------------------------

TEST(ModelAxis, ZeroDAndOneElementAxes) {
  const std::vector<int64_t> x = {1, 2, 3, 4, 5, 6};
  const Tensor tx = make<int64_t>({2, 3}, x);
  const auto by0 = ref_scan<int64_t>(x, {2, 3}, 0, false, false, false);
  const auto by1 = ref_scan<int64_t>(x, {2, 3}, 1, false, false, false);
  for (int32_t axis_type : {kInt32, kInt64}) {
    const Model m = load(scan_model(14, kInt64, "CumSum", axis_type));
    auto run_with = [&](const Tensor& axis) {
      return values_of<int64_t>(m.run({{"x", tx}, {"axis", axis}})[0]);
    };
    if (axis_type == kInt32) {
      EXPECT_EQ(run_with(scalar_of<int32_t>(1)), by1);
      EXPECT_EQ(run_with(make<int32_t>({1}, {0})), by0);
      EXPECT_EQ(run_with(scalar_of<int32_t>(-2)), by0);
    } else {
      EXPECT_EQ(run_with(scalar_of<int64_t>(1)), by1);
      EXPECT_EQ(run_with(make<int64_t>({1}, {-1})), by1);
      EXPECT_EQ(run_with(scalar_of<int64_t>(0)), by0);
    }
  }
}

TEST(ModelAxis, BadAxesAreErrors) {
  const Model m = load(scan_model(14, kDouble, "CumSum", 0));
  const Tensor x = make<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto run_with = [&](const Tensor& tx, const Tensor& axis) {
    return m.run({{"x", tx}, {"axis", axis}});
  };
  EXPECT_CUMULUS_ERROR(run_with(x, scalar_of<int64_t>(2)), HasSubstr("CumSum"),
                       HasSubstr("axis 2 is out of range"), HasSubstr("rank 2"),
                       HasSubstr("node 'scan'"));
  EXPECT_CUMULUS_ERROR(run_with(x, scalar_of<int32_t>(-3)), HasSubstr("axis -3 is out of range"));
  EXPECT_CUMULUS_ERROR(run_with(x, make<int64_t>({1}, {7})), HasSubstr("axis 7 is out of range"));
  EXPECT_CUMULUS_ERROR(run_with(x, make<int64_t>({2}, {0, 1})), HasSubstr("'axis'"),
                       HasSubstr("0-D"), HasSubstr("[2]"));
  EXPECT_CUMULUS_ERROR(run_with(x, make<int64_t>({1, 1}, {0})), HasSubstr("'axis'"),
                       HasSubstr("[1, 1]"));
  EXPECT_CUMULUS_ERROR(run_with(x, make<int64_t>({0}, {})), HasSubstr("'axis'"), HasSubstr("[0]"));
  EXPECT_CUMULUS_ERROR(run_with(x, scalar_of<double>(0)), HasSubstr("'axis'"),
                       HasSubstr("int32 or int64"), HasSubstr("float64"));
  EXPECT_CUMULUS_ERROR(run_with(scalar_of<double>(1), scalar_of<int64_t>(0)), HasSubstr("CumSum"),
                       HasSubstr("rank 0"));
  const Model prod = load(scan_model(26, kDouble, "CumProd"));
  EXPECT_CUMULUS_ERROR(prod.run({{"x", x}, {"axis", scalar_of<int64_t>(-5)}}), HasSubstr("CumProd"),
                       HasSubstr("axis -5 is out of range"), HasSubstr("rank 2"));
  // An axis from a Constant node is checked the same way.
  ModelBuilder b(14);
  b.input("x", kDouble).output("y");
  set_int(b.node("Constant", {}, {"k"}), "value_int", 3);
  b.node("CumSum", {"x", "k"}, {"y"});
  EXPECT_CUMULUS_ERROR(load(b).run({{"x", x}}), HasSubstr("axis 3 is out of range"));
}

TEST(ModelAttributes, ExclusiveAndReverse) {
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const Shape shape = {2, 3, 2};
  const Tensor tx = make<double>(shape, x);
  for (const char* op : {"CumSum", "CumProd"}) {
    for (int exclusive = 0; exclusive <= 1; ++exclusive) {
      for (int reverse = 0; reverse <= 1; ++reverse) {
        ModelBuilder b = scan_model(26, kDouble, op);
        auto& node = *b.graph().mutable_node(0);
        set_int(node, "exclusive", exclusive);
        set_int(node, "reverse", reverse);
        const Model m = load(b);
        for (int64_t axis = -3; axis < 3; ++axis) {
          SCOPED_TRACE(
              fmt::format("{} exclusive={} reverse={} axis={}", op, exclusive, reverse, axis));
          const Tensor ta = scalar_of<int64_t>(axis);
          EXPECT_EQ(values_of<double>(m.run({{"x", tx}, {"axis", ta}})[0]),
                    ref_scan<double>(x, shape, axis, exclusive == 1, reverse == 1,
                                     std::string(op) == "CumProd"));
        }
      }
    }
  }
}

TEST(ModelAttributes, BadAttributesAreErrors) {
  for (const char* op : {"CumSum", "CumProd"}) {
    const std::string versioned = std::string(op) + (std::string(op) == "CumSum" ? "-14" : "-26");
    {
      ModelBuilder b = scan_model(26, kFloat, op);
      set_int(*b.graph().mutable_node(0), "exclusive", 2);
      EXPECT_CUMULUS_ERROR(load(b), HasSubstr(versioned), HasSubstr("'exclusive'"),
                           HasSubstr("must be 0 or 1, not 2"));
    }
    {
      ModelBuilder b = scan_model(26, kFloat, op);
      set_int(*b.graph().mutable_node(0), "reverse", -1);
      EXPECT_CUMULUS_ERROR(load(b), HasSubstr("'reverse'"), HasSubstr("not -1"));
    }
    {
      ModelBuilder b = scan_model(26, kFloat, op);
      set_float(*b.graph().mutable_node(0), "exclusive", 1.0f);
      EXPECT_CUMULUS_ERROR(load(b), HasSubstr("'exclusive'"), HasSubstr("must be an int"));
    }
    {
      ModelBuilder b = scan_model(26, kFloat, op);
      set_int(*b.graph().mutable_node(0), "axis", 0);
      EXPECT_CUMULUS_ERROR(load(b), HasSubstr(versioned), HasSubstr("unknown attribute 'axis'"),
                           HasSubstr("'scan'"));
    }
  }
  ModelBuilder b(14);
  b.input("x", kFloat).output("y");
  set_int(b.node("Identity", {"x"}, {"y"}, "id"), "foo", 1);
  EXPECT_CUMULUS_ERROR(load(b), HasSubstr("Identity"), HasSubstr("unknown attribute 'foo'"));
  ModelBuilder two(14);
  two.input("x", kFloat).output("y");
  two.node("Identity", {"x", "x"}, {"y"}, "id");
  EXPECT_CUMULUS_ERROR(load(two), HasSubstr("Identity"), HasSubstr("needs 1 input"));
}

// ---- Feeds --------------------------------------------------------------------------------------

TEST(ModelFeeds, CheckedAgainstDeclaredTypesAndDimensions) {
  ModelBuilder b(14);
  b.input("x", kDouble, std::vector<Dim>{2, 3});
  b.input("n", kDouble, std::vector<Dim>{Dim::param("N"), 3});
  b.input("free", kDouble);  // no shape: any rank
  b.input("axis", kInt64, std::vector<Dim>{});
  b.output("a").output("c").output("d");
  b.node("CumSum", {"x", "axis"}, {"a"});
  b.node("CumSum", {"n", "axis"}, {"c"});
  b.node("CumSum", {"free", "axis"}, {"d"});
  const Model m = load(b);
  ASSERT_EQ(m.inputs().size(), 4u);
  EXPECT_EQ(m.inputs()[1].dims, (std::vector<std::optional<int64_t>>{std::nullopt, 3}));
  EXPECT_FALSE(m.inputs()[2].has_shape);

  const Tensor x = make<double>({2, 3}, iota_values<double>(6));
  const Tensor axis = scalar_of<int64_t>(-1);
  for (int64_t rows : {0, 1, 5}) {
    const Tensor n = Tensor::zeros(DType::kFloat64, {rows, 3});
    const Tensor free = Tensor::zeros(DType::kFloat64, {rows + 1, 1, 2});
    const auto out = m.run({{"x", x}, {"n", n}, {"free", free}, {"axis", axis}});
    EXPECT_EQ(out[1].shape(), (Shape{rows, 3}));
    EXPECT_EQ(out[2].shape(), (Shape{rows + 1, 1, 2}));
  }
  const Tensor n = make<double>({1, 3}, {1, 2, 3});
  const Tensor x32 = make<float>({2, 3}, iota_values<float>(6));
  const Tensor x24 = make<double>({2, 4}, iota_values<double>(8));
  const Tensor x6 = make<double>({6}, iota_values<double>(6));
  const Tensor n4 = make<double>({1, 4}, iota_values<double>(4));
  const Tensor axis32 = scalar_of<int32_t>(0);
  const Tensor axis1 = make<int64_t>({1}, {0});
  EXPECT_CUMULUS_ERROR(m.run({{"x", x32}, {"n", n}, {"free", n}, {"axis", axis}}),
                       HasSubstr("input 'x' is declared float64 but was given float32"));
  EXPECT_CUMULUS_ERROR(m.run({{"x", x24}, {"n", n}, {"free", n}, {"axis", axis}}),
                       HasSubstr("input 'x' has shape [2, 4] but the model declares [2, 3]"));
  EXPECT_CUMULUS_ERROR(m.run({{"x", x6}, {"n", n}, {"free", n}, {"axis", axis}}),
                       HasSubstr("input 'x' has shape [6]"));
  EXPECT_CUMULUS_ERROR(m.run({{"x", x}, {"n", n4}, {"free", n}, {"axis", axis}}),
                       HasSubstr("input 'n' has shape [1, 4] but the model declares [?, 3]"));
  EXPECT_CUMULUS_ERROR(m.run({{"x", x}, {"n", n}, {"free", n}, {"axis", axis32}}),
                       HasSubstr("input 'axis' is declared int64 but was given int32"));
  EXPECT_CUMULUS_ERROR(m.run({{"x", x}, {"n", n}, {"free", n}, {"axis", axis1}}),
                       HasSubstr("input 'axis' has shape [1] but the model declares []"));
  EXPECT_CUMULUS_ERROR(m.run({{"x", x}, {"n", n}, {"free", n}, {"axis", axis}, {"z", axis}}),
                       HasSubstr("unknown input 'z'"), HasSubstr("x, n, free, axis"));
  EXPECT_CUMULUS_ERROR(m.run({{"x", x}, {"n", n}, {"axis", axis}}),
                       HasSubstr("missing input 'free'"));
  EXPECT_CUMULUS_ERROR(m.run({{"x", x}, {"n", n}, {"free", n}}), HasSubstr("missing input 'axis'"),
                       HasSubstr("int64"));
}

TEST(ModelFeeds, ImpossibleShapesNameTheInput) {
  // A view with a negative dimension or an element count beyond int64 is refused before use,
  // and the message says which feed it was.
  const Model m = load(scan_model(14, kFloat));
  const float data[1] = {1};
  const Tensor axis = scalar_of<int64_t>(0);
  const Shape negative = {2, -1};
  EXPECT_CUMULUS_ERROR(
      m.run({{"x", ConstTensorView(DType::kFloat32, negative, data)}, {"axis", axis}}),
      HasSubstr("negative"), HasSubstr("'x'"));
  const Shape huge = {INT64_MAX / 2, 4};
  EXPECT_CUMULUS_ERROR(m.run({{"x", ConstTensorView(DType::kFloat32, huge, data)}, {"axis", axis}}),
                       HasSubstr("64 bits"), HasSubstr("'x'"));
}

TEST(ModelFeeds, EmptyTensorsRun) {
  const Model scan = load(scan_model(26, kFloat));
  const Model prod = load(scan_model(26, kInt32, "CumProd"));
  for (const Shape& shape : {Shape{0}, Shape{0, 3}, Shape{2, 0}, Shape{3, 0, 2}}) {
    for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
      SCOPED_TRACE(testing::PrintToString(shape) + " axis " + std::to_string(axis));
      const Tensor ta = scalar_of<int64_t>(axis);
      const Tensor x = Tensor::zeros(DType::kFloat32, shape);
      const auto y = scan.run({{"x", x}, {"axis", ta}});
      EXPECT_EQ(y[0].shape(), shape);
      EXPECT_EQ(y[0].dtype(), DType::kFloat32);
      const Tensor xi = Tensor::zeros(DType::kInt32, shape);
      EXPECT_EQ(prod.run({{"x", xi}, {"axis", ta}})[0].shape(), shape);
    }
  }
  const Model sum = load(sum_model(13, kDouble));
  const Tensor a = Tensor::zeros(DType::kFloat64, {0, 3});
  const Tensor row = make<double>({3}, {1, 2, 3});
  EXPECT_EQ(sum.run({{"d0", a}, {"d1", row}})[0].shape(), (Shape{0, 3}));
  const Tensor col = Tensor::zeros(DType::kFloat64, {2, 0});
  const Tensor one = make<double>({1}, {5});
  EXPECT_EQ(sum.run({{"d0", col}, {"d1", one}})[0].shape(), (Shape{2, 0}));
}

// ---- Graph errors -------------------------------------------------------------------------------

TEST(ModelErrors, UnknownOperators) {
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("y");
    b.node("Relu", {"x"}, {"y"}, "act");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("unknown operator 'Relu'"), HasSubstr("'act'"));
    EXPECT_EQ(code_of([&] { load(b); }), ErrorCode::kUnsupported);
  }
  {
    ModelBuilder b(14);
    auto* custom = b.proto().add_opset_import();
    custom->set_domain("com.example");
    custom->set_version(1);
    b.input("x", kFloat).input("axis", kInt64).output("y");
    b.node("CumSum", {"x", "axis"}, {"y"}).set_domain("com.example");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("unknown operator 'com.example.CumSum'"));
  }
}

TEST(ModelErrors, Cycles) {
  ModelBuilder b(14);
  b.input("x", kFloat).output("y");
  b.node("Sum", {"x", "b"}, {"a"}, "first");
  b.node("Sum", {"a"}, {"b"}, "second");
  b.node("Identity", {"a"}, {"y"}, "after");
  EXPECT_CUMULUS_ERROR(load(b), HasSubstr("cycle"), HasSubstr("'first'"), HasSubstr("'second'"));
  ModelBuilder self(14);
  self.input("x", kFloat).output("y");
  self.node("Sum", {"x", "y"}, {"y"}, "loop");
  EXPECT_CUMULUS_ERROR(load(self), HasSubstr("cycle"), HasSubstr("'loop'"));
}

TEST(ModelErrors, UndefinedAndDuplicateNames) {
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("y");
    b.node("CumSum", {"x", "nope"}, {"y"}, "scan");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("'nope'"), HasSubstr("'scan'"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("y");
    b.node("Identity", {"x"}, {"y"}, "one");
    b.node("Identity", {"x"}, {"y"}, "two");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("'y' is defined twice"), HasSubstr("'one'"),
                         HasSubstr("'two'"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("x");
    b.node("Identity", {"x"}, {"x"}, "overwrite");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("'x' is defined twice"), HasSubstr("graph input 'x'"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("y");
    b.initializer(scalar_proto<float>("w", 1));
    b.node("Sum", {"x", "w"}, {"y"});
    b.node("Identity", {"x"}, {"w"}, "shadow");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("'w' is defined twice"), HasSubstr("initializer 'w'"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("x");
    b.initializer(scalar_proto<float>("w", 1));
    b.initializer(scalar_proto<float>("w", 2));
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("initializer 'w' is defined twice"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).input("x", kFloat).output("x");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("'x' is defined twice"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("y").output("q");
    b.node("Identity", {"x"}, {"y"});
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("graph output 'q'"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("y").output("z");
    b.node("Identity", {"x"}, {"y", "z"}, "two_out");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("'two_out'"), HasSubstr("exactly one output"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("y");
    b.node("Identity", {"x"}, {""}, "unnamed");
    b.node("Identity", {"x"}, {"y"});
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("empty tensor name"));
  }
}

TEST(ModelErrors, WrongArityAndDeclaredTypes) {
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("y");
    b.node("CumSum", {"x"}, {"y"}, "scan");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("CumSum-14"), HasSubstr("needs 2 inputs"));
  }
  {
    ModelBuilder b(14);
    b.output("y");
    b.node("Sum", {}, {"y"}, "nothing");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("Sum-13"), HasSubstr("at least one input"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).input("axis", kInt64).output("y", kDouble);
    b.node("CumSum", {"x", "axis"}, {"y"});
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("graph output 'y' is declared float64"),
                         HasSubstr("float32"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kDouble).output("x");
    b.initializer(tensor_proto<float>("x", {1}, {1}));
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("graph input 'x' is declared float64"),
                         HasSubstr("initializer is float32"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kDouble).output("x");
    b.graph().mutable_input(0)->mutable_type()->mutable_sequence_type();
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("graph input 'x' is not a tensor"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kDouble, std::vector<Dim>{-2}).output("x");
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("'x'"), HasSubstr("negative dimension -2"));
  }
}

TEST(ModelErrors, ExternalDataIsRefused) {
  auto external = [] {
    ::onnx::TensorProto t = tensor_proto<float>("w", {2}, {});
    t.clear_raw_data();
    t.set_data_location(::onnx::TensorProto::EXTERNAL);
    auto* entry = t.add_external_data();
    entry->set_key("location");
    entry->set_value("weights.bin");
    return t;
  };
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("y");
    b.initializer(external());
    b.node("Sum", {"x", "w"}, {"y"});
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("initializer 'w'"), HasSubstr("external data"),
                         HasSubstr("weights.bin"));
    EXPECT_EQ(code_of([&] { load(b); }), ErrorCode::kUnsupported);
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat).output("y");
    b.constant("w", external());
    b.node("Sum", {"x", "w"}, {"y"});
    EXPECT_CUMULUS_ERROR(load(b), HasSubstr("Constant"), HasSubstr("external data"));
  }
}

TEST(ModelErrors, BytesThatAreNotAModel) {
  const std::string garbage = "\xff\xff\xff\xff not a protobuf \x01\x02";
  EXPECT_CUMULUS_ERROR(Model::parse(std::as_bytes(std::span(garbage)), "m.onnx"),
                       HasSubstr("m.onnx"), HasSubstr("not a valid ONNX model"));
  EXPECT_EQ(code_of([&] { Model::parse(std::as_bytes(std::span(garbage))); }), ErrorCode::kParse);
  // Truncated in the middle of a field.
  ModelBuilder b = scan_model(14, kFloat);
  const std::string bytes = b.bytes();
  const std::string cut = bytes.substr(0, bytes.size() / 2);
  EXPECT_CUMULUS_ERROR(Model::parse(std::as_bytes(std::span(cut))),
                       HasSubstr("not a valid ONNX model"));
  // No bytes at all is an empty ModelProto: IR version 0.
  EXPECT_CUMULUS_ERROR(Model::parse({}), HasSubstr("IR version 0"));
}

TEST(ModelErrors, LoadFromFile) {
  TempDir dir;
  scan_model(14, kFloat).write(dir / "m.onnx");
  const Model m = Model::load(dir / "m.onnx");
  EXPECT_EQ(m.inputs().size(), 2u);
  EXPECT_CUMULUS_ERROR(Model::load(dir / "missing.onnx"), HasSubstr("missing.onnx"));
  ModelBuilder::write_bytes(dir / "bad.onnx", "\x08\xff\xff");
  EXPECT_CUMULUS_ERROR(Model::load(dir / "bad.onnx"), HasSubstr("bad.onnx"),
                       HasSubstr("not a valid ONNX model"));
  ModelBuilder relu(14);
  relu.input("x", kFloat).output("y");
  relu.node("Relu", {"x"}, {"y"});
  relu.write(dir / "relu.onnx");
  EXPECT_CUMULUS_ERROR(Model::load(dir / "relu.onnx"), HasSubstr("relu.onnx"), HasSubstr("Relu"));
}

TEST(ModelErrors, LargerThanProtobufParses) {
  const Untouched memory(std::size_t{1} << 31);
  ASSERT_TRUE(memory.mapped());
  const auto two_gib = memory.bytes(std::size_t{1} << 31);
  EXPECT_EQ(error_of([&] { Model::parse(two_gib, "model 'big'"); }),
            "model 'big': 2147483648 bytes is more than protobuf can parse (2 GiB)");
  EXPECT_EQ(code_of([&] { Model::parse(two_gib); }), ErrorCode::kLimit);
  // One byte less is for protobuf to judge (zeros are not a model).
  const auto most = memory.bytes((std::size_t{1} << 31) - 1);
  EXPECT_EQ(error_of([&] { Model::parse(most, "model 'big'"); }),
            "model 'big': not a valid ONNX model (the protobuf does not parse)");

  // A file is refused by its size before it is read: with the memory limit below its size,
  // reading it first would report the limit instead.
  TempDir dir;
  const fs::path path = dir / "big.onnx";
  ModelBuilder::write_bytes(path, "");
  fs::resize_file(path, (std::uintmax_t{1} << 31) + 1);  // a hole: no disk, no memory
  const auto saved = memory_limit();
  set_memory_limit(std::size_t{1} << 20);
  EXPECT_EQ(error_of([&] { Model::load(path); }),
            fmt::format("model '{}': 2147483649 bytes is more than protobuf can parse (2 GiB)",
                        path.string()));
  set_memory_limit(saved);
}

// ---- Numbers ------------------------------------------------------------------------------------

TEST(ModelNumbers, IntegersWrapAround) {
  const Model sum = load(scan_model(14, kInt64));
  const Model prod = load(scan_model(26, kUInt32, "CumProd"));
  const std::vector<int64_t> x = {INT64_MAX, 1, INT64_MAX, 3};
  const Tensor tx = make<int64_t>({4}, x);
  const Tensor axis = scalar_of<int64_t>(0);
  EXPECT_EQ(values_of<int64_t>(sum.run({{"x", tx}, {"axis", axis}})[0]),
            ref_scan<int64_t>(x, {4}, 0, false, false, false));
  const std::vector<uint32_t> u = {65536, 65536, 3, 0xffffffffu};
  const Tensor tu = make<uint32_t>({4}, u);
  EXPECT_EQ(values_of<uint32_t>(prod.run({{"x", tu}, {"axis", axis}})[0]),
            ref_scan<uint32_t>(u, {4}, 0, false, false, true));
}

// Random chains over every dtype the scans take, with small integer values so every result is
// exact and the reference is compared bit for bit.
template <class T>
void check_random_chains(uint32_t seed) {
  std::mt19937 rng(seed);
  SCOPED_TRACE(fmt::format("seed {}", seed));
  for (int trial = 0; trial < 20; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    Shape shape;
    for (int d = 0; d < rank; ++d) shape.push_back(static_cast<int64_t>(rng() % 5));
    const auto count = static_cast<std::size_t>(count_of(shape));
    std::vector<T> x(count);
    for (auto& v : x) {
      v = static_cast<T>(static_cast<int>(rng() % 5) - (std::is_unsigned_v<T> ? 0 : 2));
    }
    const auto axis1 = static_cast<int64_t>(rng() % static_cast<uint32_t>(2 * rank)) - rank;
    const auto axis2 = static_cast<int64_t>(rng() % static_cast<uint32_t>(rank));
    const bool ex1 = rng() % 2 == 1, rev1 = rng() % 2 == 1, ex2 = rng() % 2 == 1,
               rev2 = rng() % 2 == 1;
    SCOPED_TRACE(fmt::format("trial {} shape {} axes {} {} attrs {}{}{}{}", trial,
                             fmt::join(shape, "x"), axis1, axis2, ex1, rev1, ex2, rev2));
    // p = CumProd(CumSum(x, axis1), axis2); both outputs.
    ModelBuilder b(26);
    b.input("x", elem_type_of<T>()).output("p").output("s");
    b.initializer(scalar_proto<int64_t>("a1", axis1));
    b.initializer(scalar_proto<int32_t>("a2", static_cast<int32_t>(axis2)));
    auto& prod = b.node("CumProd", {"s", "a2"}, {"p"});
    set_int(prod, "exclusive", ex2);
    set_int(prod, "reverse", rev2);
    auto& scan = b.node("CumSum", {"x", "a1"}, {"s"});
    set_int(scan, "exclusive", ex1);
    set_int(scan, "reverse", rev1);
    const Model m = load(b);
    const Tensor tx = make<T>(shape, x);
    const auto out = m.run({{"x", tx}});
    const auto s = ref_scan<T>(x, shape, axis1, ex1, rev1, false);
    EXPECT_EQ(values_of<T>(out[1]), s);
    EXPECT_EQ(values_of<T>(out[0]), ref_scan<T>(s, shape, axis2, ex2, rev2, true));
    EXPECT_EQ(out[0].shape(), shape);
    EXPECT_EQ(values_of<T>(tx), x);
  }
}

TEST(ModelNumbers, RandomChainsMatchTheReference) {
  check_random_chains<float>(11);
  check_random_chains<double>(12);
  check_random_chains<int32_t>(13);
  check_random_chains<int64_t>(14);
  check_random_chains<uint32_t>(15);
  check_random_chains<uint64_t>(16);
}

TEST(ModelNumbers, HalfTypesThroughAGraph) {
  // y = Sum(CumSum(x, 0), x) in float16 and bfloat16, all values exact.
  for (int32_t type : {kFloat16, kBFloat16}) {
    ModelBuilder b(26);
    b.input("x", type, std::vector<Dim>{4}).output("y", type);
    set_int(b.node("Constant", {}, {"axis"}), "value_int", 0);
    b.node("CumSum", {"x", "axis"}, {"c"});
    b.node("Sum", {"c", "x"}, {"y"});
    const Model m = load(b);
    const std::vector<int> x = {1, -2, 8, 16}, want = {2, -3, 15, 39};
    if (type == kFloat16) {
      std::vector<Float16> hx, hy;
      for (int v : x) hx.push_back(half_of(v));
      for (int v : want) hy.push_back(half_of(v));
      EXPECT_EQ(values_of<Float16>(m.run({{"x", make<Float16>({4}, hx)}})[0]), hy);
    } else {
      std::vector<BFloat16> hx, hy;
      for (int v : x) hx.push_back(bhalf_of(v));
      for (int v : want) hy.push_back(bhalf_of(v));
      EXPECT_EQ(values_of<BFloat16>(m.run({{"x", make<BFloat16>({4}, hx)}})[0]), hy);
    }
  }
}

}  // namespace
}  // namespace cumulus::onnx
