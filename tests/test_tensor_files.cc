// Tensor files: TensorProto and .npy round trips, every parse error, and atomic writes.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cumulus/error.h"
#include "cumulus/onnx.h"
#include "onnx/proto.h"
#include "untouched.h"

namespace cumulus::onnx {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Property;
using ::testing::Throws;

auto throws_error(ErrorCode code, const std::string& substring) {
  return Throws<Error>(AllOf(Property("code", &Error::code, code),
                             Property("what", &Error::what, HasSubstr(substring))));
}

// Exactly `message`, with `code`.
auto throws_exactly(ErrorCode code, const std::string& message) {
  return Throws<Error>(AllOf(Property("code", &Error::code, code),
                             Property("what", &Error::what, ::testing::StrEq(message))));
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

const std::vector<Shape> test_shapes = {{},        {0},          {7},         {2, 3},
                                        {2, 0, 3}, {1, 2, 3, 4}, {3, 1, 0, 2}};

// Random bytes, NaNs with payloads and all: files must carry them bit for bit.
Tensor random_tensor(DType dtype, const Shape& shape, uint32_t seed) {
  Tensor t(dtype, shape);
  std::mt19937 random(seed);
  auto* bytes = static_cast<unsigned char*>(t.raw());
  for (std::size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(random());
  return t;
}

void expect_same(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.dtype(), expected.dtype());
  EXPECT_EQ(actual.shape(), expected.shape());
  ASSERT_EQ(actual.nbytes(), expected.nbytes());
  if (expected.nbytes() != 0) {
    EXPECT_EQ(std::memcmp(actual.raw(), expected.raw(), expected.nbytes()), 0);
  }
}

std::string serialized(const ::onnx::TensorProto& proto) {
  std::string bytes;
  EXPECT_TRUE(proto.SerializeToString(&bytes));
  return bytes;
}

::onnx::TensorProto float_proto(std::initializer_list<int64_t> dims, int values) {
  ::onnx::TensorProto proto;
  proto.set_name("x");
  proto.set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) proto.add_dims(d);
  for (int i = 0; i < values; ++i) proto.add_float_data(static_cast<float>(i));
  return proto;
}

// A .npy file put together by hand, independent of serialize_npy: no padding, any header.
std::string npy_file(std::string_view header, std::string_view data, char major = 1) {
  std::string bytes = std::string("\x93NUMPY", 6) + major + '\0';
  const auto length = static_cast<uint32_t>(header.size() + 1);
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) bytes += static_cast<char>(length >> (8 * i));
  bytes += header;
  bytes += '\n';
  bytes += data;
  return bytes;
}

std::string float_bytes(std::initializer_list<float> values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), std::data(values), bytes.size());
  return bytes;
}

// ---- ONNX data types ----------------------------------------------------------------------------

TEST(OnnxTypes, EveryDTypeRoundTripsAndIsNamedLikeDTypeName) {
  for (DType dtype : kAllDTypes) {
    const int32_t onnx_type = onnx_from_dtype(dtype);
    EXPECT_EQ(dtype_from_onnx(onnx_type), dtype);
    EXPECT_EQ(onnx_type_name(onnx_type), dtype_name(dtype));
  }
}

TEST(OnnxTypes, NumbersAreTheOnesInOnnxProto) {
  EXPECT_EQ(onnx_from_dtype(DType::kFloat32), ::onnx::TensorProto::FLOAT);
  EXPECT_EQ(onnx_from_dtype(DType::kFloat64), ::onnx::TensorProto::DOUBLE);
  EXPECT_EQ(onnx_from_dtype(DType::kFloat16), ::onnx::TensorProto::FLOAT16);
  EXPECT_EQ(onnx_from_dtype(DType::kBFloat16), ::onnx::TensorProto::BFLOAT16);
  EXPECT_EQ(onnx_from_dtype(DType::kInt32), ::onnx::TensorProto::INT32);
  EXPECT_EQ(onnx_from_dtype(DType::kInt64), ::onnx::TensorProto::INT64);
  EXPECT_EQ(onnx_from_dtype(DType::kUInt32), ::onnx::TensorProto::UINT32);
  EXPECT_EQ(onnx_from_dtype(DType::kUInt64), ::onnx::TensorProto::UINT64);
}

TEST(OnnxTypes, TypesCumulusDoesNotRunHaveNamesButNoDType) {
  constexpr std::pair<int32_t, std::string_view> kNames[] = {
      {0, "undefined"},
      {2, "uint8"},
      {3, "int8"},
      {4, "uint16"},
      {5, "int16"},
      {8, "string"},
      {9, "bool"},
      {14, "complex64"},
      {15, "complex128"},
      {17, "float8e4m3fn"},
      {18, "float8e4m3fnuz"},
      {19, "float8e5m2"},
      {20, "float8e5m2fnuz"},
      {21, "uint4"},
      {22, "int4"},
      {23, "float4e2m1"},
      {24, "float8e8m0"},
      {25, "uint2"},
      {26, "int2"},
  };
  for (const auto& [onnx_type, name] : kNames) {
    EXPECT_EQ(onnx_type_name(onnx_type), name);
    EXPECT_EQ(dtype_from_onnx(onnx_type), std::nullopt) << name;
  }
  EXPECT_EQ(onnx_type_name(42), "unknown type 42");
  EXPECT_EQ(onnx_type_name(-1), "unknown type -1");
  EXPECT_EQ(dtype_from_onnx(42), std::nullopt);
}

// ---- TensorProto --------------------------------------------------------------------------------

TEST(TensorProto, RawDataRoundTripsEveryDTypeAndShape) {
  uint32_t seed = 1;
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape : test_shapes) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dtype), shape_string(shape)));
      const Tensor t = random_tensor(dtype, shape, seed++);
      const std::string bytes = serialize_tensor_proto(t, "input_0");

      ::onnx::TensorProto proto;
      ASSERT_TRUE(proto.ParseFromString(bytes));
      EXPECT_EQ(proto.name(), "input_0");
      EXPECT_EQ(proto.data_type(), onnx_from_dtype(dtype));
      EXPECT_EQ(Shape(proto.dims().begin(), proto.dims().end()), shape);
      EXPECT_TRUE(proto.has_raw_data());
      EXPECT_EQ(proto.raw_data().size(), t.nbytes());

      std::string name;
      expect_same(parse_tensor_proto(bytes_of(bytes), &name), t);
      EXPECT_EQ(name, "input_0");
    }
  }
}

TEST(TensorProto, NameIsOptional) {
  const Tensor t = Tensor::scalar<int64_t>(-5);
  const std::string bytes = serialize_tensor_proto(t, "");
  expect_same(parse_tensor_proto(bytes_of(bytes)), t);
  std::string name = "stale";
  parse_tensor_proto(bytes_of(bytes), &name);
  EXPECT_EQ(name, "");
}

TEST(TensorProto, TypedFieldsOfEveryDType) {
  constexpr float kNanWithPayload = std::bit_cast<float>(0x7fc00123u);
  ::onnx::TensorProto proto;
  for (float v :
       {1.5f, -0.0f, std::numeric_limits<float>::infinity(), kNanWithPayload, 1e-40f, -3.25f}) {
    proto.add_float_data(v);
  }
  proto.add_dims(2);
  proto.add_dims(3);
  proto.set_data_type(::onnx::TensorProto::FLOAT);
  Tensor t = parse_tensor_proto(bytes_of(serialized(proto)));
  ASSERT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(t.data<float>()[i]),
              std::bit_cast<uint32_t>(proto.float_data(i)));
  }

  proto.Clear();
  constexpr double kDoubles[] = {0.1, -1e300, std::numeric_limits<double>::denorm_min()};
  for (double v : kDoubles) proto.add_double_data(v);
  proto.add_dims(3);
  proto.set_data_type(::onnx::TensorProto::DOUBLE);
  t = parse_tensor_proto(bytes_of(serialized(proto)));
  ASSERT_EQ(t.dtype(), DType::kFloat64);
  EXPECT_THAT(t.values<double>(), ::testing::ElementsAreArray(kDoubles));

  // Half types keep their bit patterns in int32_data.
  for (auto [onnx_type, dtype] : {std::pair{::onnx::TensorProto::FLOAT16, DType::kFloat16},
                                  std::pair{::onnx::TensorProto::BFLOAT16, DType::kBFloat16}}) {
    proto.Clear();
    constexpr uint16_t kBits[] = {0, 0x3c00, 0x8000, 0x7c00, 0x7e01, 0xffff};
    for (uint16_t bits : kBits) proto.add_int32_data(bits);
    proto.add_dims(6);
    proto.set_data_type(onnx_type);
    t = parse_tensor_proto(bytes_of(serialized(proto)));
    ASSERT_EQ(t.dtype(), dtype);
    for (int i = 0; i < 6; ++i) {
      uint16_t bits;
      std::memcpy(&bits, static_cast<const char*>(t.raw()) + 2 * static_cast<std::size_t>(i), 2);
      EXPECT_EQ(bits, kBits[i]);
    }
  }

  proto.Clear();
  constexpr int32_t kInt32s[] = {std::numeric_limits<int32_t>::min(), -1, 0,
                                 std::numeric_limits<int32_t>::max()};
  for (int32_t v : kInt32s) proto.add_int32_data(v);
  proto.add_dims(2);
  proto.add_dims(2);
  proto.set_data_type(::onnx::TensorProto::INT32);
  t = parse_tensor_proto(bytes_of(serialized(proto)));
  ASSERT_EQ(t.dtype(), DType::kInt32);
  EXPECT_THAT(t.values<int32_t>(), ::testing::ElementsAreArray(kInt32s));

  proto.Clear();
  constexpr int64_t kInt64s[] = {std::numeric_limits<int64_t>::min(), -1, 0,
                                 std::numeric_limits<int64_t>::max()};
  for (int64_t v : kInt64s) proto.add_int64_data(v);
  proto.add_dims(4);
  proto.set_data_type(::onnx::TensorProto::INT64);
  t = parse_tensor_proto(bytes_of(serialized(proto)));
  ASSERT_EQ(t.dtype(), DType::kInt64);
  EXPECT_THAT(t.values<int64_t>(), ::testing::ElementsAreArray(kInt64s));

  // uint32 widens into uint64_data.
  proto.Clear();
  constexpr uint32_t kUInt32s[] = {0, 1, 0x80000000u, std::numeric_limits<uint32_t>::max()};
  for (uint32_t v : kUInt32s) proto.add_uint64_data(v);
  proto.add_dims(4);
  proto.set_data_type(::onnx::TensorProto::UINT32);
  t = parse_tensor_proto(bytes_of(serialized(proto)));
  ASSERT_EQ(t.dtype(), DType::kUInt32);
  EXPECT_THAT(t.values<uint32_t>(), ::testing::ElementsAreArray(kUInt32s));

  proto.Clear();
  constexpr uint64_t kUInt64s[] = {0, 1, uint64_t{1} << 63, std::numeric_limits<uint64_t>::max()};
  for (uint64_t v : kUInt64s) proto.add_uint64_data(v);
  proto.add_dims(4);
  proto.set_data_type(::onnx::TensorProto::UINT64);
  t = parse_tensor_proto(bytes_of(serialized(proto)));
  ASSERT_EQ(t.dtype(), DType::kUInt64);
  EXPECT_THAT(t.values<uint64_t>(), ::testing::ElementsAreArray(kUInt64s));
}

TEST(TensorProto, TypedFieldsForScalarsAndEmptyTensors) {
  ::onnx::TensorProto proto;
  proto.set_data_type(::onnx::TensorProto::INT64);
  proto.add_int64_data(42);
  Tensor t = parse_tensor_proto(bytes_of(serialized(proto)));
  EXPECT_EQ(t.shape(), Shape{});
  EXPECT_EQ(t.data<int64_t>()[0], 42);

  proto.Clear();
  proto.set_data_type(::onnx::TensorProto::FLOAT);
  proto.add_dims(3);
  proto.add_dims(0);
  t = parse_tensor_proto(bytes_of(serialized(proto)));
  EXPECT_EQ(t.shape(), (Shape{3, 0}));
  EXPECT_EQ(t.size(), 0);
}

TEST(TensorProto, NotAProtobuf) {
  EXPECT_THAT([] { parse_tensor_proto(bytes_of("\xff\xff\xff\xff")); },
              throws_error(ErrorCode::kParse, "TensorProto: 4 bytes are not a valid protobuf"));
}

TEST(TensorProto, ExternalDataIsRefused) {
  ::onnx::TensorProto proto = float_proto({2}, 0);
  proto.set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* entry = proto.add_external_data();
  entry->set_key("location");
  entry->set_value("weights.bin");
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kUnsupported,
                           "TensorProto 'x': external data (location 'weights.bin') is not "
                           "supported; store the values in the tensor itself"));

  proto.clear_external_data();
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kUnsupported,
                           "external data (data_location EXTERNAL) is not supported"));
}

TEST(TensorProto, SegmentsAreRefused) {
  ::onnx::TensorProto proto = float_proto({2}, 2);
  proto.mutable_segment()->set_begin(0);
  proto.mutable_segment()->set_end(2);
  EXPECT_THAT(
      [&] { parse_tensor_proto(bytes_of(serialized(proto))); },
      throws_error(ErrorCode::kUnsupported,
                   "TensorProto 'x': segmented tensors (segment 0 to 2) are not supported"));
}

TEST(TensorProto, UnsupportedDataTypesAreNamed) {
  ::onnx::TensorProto proto = float_proto({2}, 0);
  proto.set_data_type(::onnx::TensorProto::INT8);
  proto.set_raw_data("ab");
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kUnsupported,
                           "TensorProto 'x': data type int8 (3) is not supported (supported: "
                           "float32, float64, float16, bfloat16, int32, int64, uint32, uint64)"));
  proto.set_data_type(::onnx::TensorProto::STRING);
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kUnsupported, "data type string (8) is not supported"));
  proto.set_data_type(999);
  EXPECT_THAT(
      [&] { parse_tensor_proto(bytes_of(serialized(proto))); },
      throws_error(ErrorCode::kUnsupported, "data type unknown type 999 (999) is not supported"));
  proto.clear_data_type();
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kUnsupported, "data type undefined (0) is not supported"));
}

TEST(TensorProto, NegativeDims) {
  EXPECT_THAT(
      [] {
        parse_tensor_proto(bytes_of(serialized(float_proto({2, -3}, 0))));
      },
      throws_error(ErrorCode::kParse, "TensorProto 'x': dims [2, -3] has a negative dimension"));
}

TEST(TensorProto, OverflowingDims) {
  EXPECT_THAT(
      [] {
        parse_tensor_proto(bytes_of(serialized(float_proto({int64_t{1} << 62, 8}, 0))));
      },
      throws_error(ErrorCode::kLimit,
                   "TensorProto 'x': shape [4611686018427387904, 8] has more "
                   "elements than fit in 64 bits"));
  // The count fits, its bytes do not.
  ::onnx::TensorProto proto = float_proto({int64_t{1} << 61, 2}, 0);
  proto.set_data_type(::onnx::TensorProto::DOUBLE);
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kLimit,
                           "TensorProto 'x': dims [2305843009213693952, 2] of float64 needs more "
                           "bytes than fit in 64 bits"));
}

TEST(TensorProto, RawDataOfTheWrongSize) {
  ::onnx::TensorProto proto = float_proto({2, 3}, 0);
  proto.set_raw_data(std::string(20, '\0'));
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kParse,
                           "TensorProto 'x': raw_data has 20 bytes, but dims "
                           "[2, 3] of float32 needs 24"));
  proto.set_raw_data(std::string(28, '\0'));
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kParse, "raw_data has 28 bytes, but dims [2, 3]"));
  // A header claiming a huge tensor is refused before anything is allocated for it.
  proto = float_proto({int64_t{1} << 40}, 0);
  proto.set_raw_data("abcd");
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kParse,
                           "raw_data has 4 bytes, but dims [1099511627776] of "
                           "float32 needs 4398046511104"));
}

TEST(TensorProto, TypedFieldOfTheWrongLength) {
  EXPECT_THAT(
      [] {
        parse_tensor_proto(bytes_of(serialized(float_proto({2, 3}, 5))));
      },
      throws_error(ErrorCode::kParse,
                   "TensorProto 'x': float_data has 5 values, but dims "
                   "[2, 3] of float32 needs 6"));
  EXPECT_THAT(
      [] {
        parse_tensor_proto(bytes_of(serialized(float_proto({2, 3}, 7))));
      },
      throws_error(ErrorCode::kParse, "float_data has 7 values"));
  // No data at all.
  EXPECT_THAT([] { parse_tensor_proto(bytes_of(serialized(float_proto({2}, 0)))); },
              throws_error(ErrorCode::kParse,
                           "float_data has 0 values, but dims [2] of float32 "
                           "needs 2"));
}

TEST(TensorProto, DataInTwoPlacesOrTheWrongField) {
  ::onnx::TensorProto proto = float_proto({2}, 2);
  proto.set_raw_data(std::string(8, '\0'));
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kParse,
                           "TensorProto 'x': has both raw_data and float_data (2 values)"));

  proto = float_proto({2}, 0);
  proto.add_int64_data(1);
  proto.add_int64_data(2);
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kParse,
                           "TensorProto 'x': int64_data holds 2 values, but "
                           "float32 values belong in float_data or raw_data"));
}

TEST(TensorProto, TypedValuesOutsideTheirType) {
  for (auto [onnx_type, name] : {std::pair{::onnx::TensorProto::FLOAT16, "float16"},
                                 std::pair{::onnx::TensorProto::BFLOAT16, "bfloat16"}}) {
    for (int32_t bad : {65536, -1}) {
      ::onnx::TensorProto proto;
      proto.set_data_type(onnx_type);
      proto.add_dims(2);
      proto.add_int32_data(0x3c00);
      proto.add_int32_data(bad);
      EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
                  throws_error(ErrorCode::kParse,
                               fmt::format("TensorProto: int32_data[1] = {} is not a {} bit "
                                           "pattern (0 to 65535)",
                                           bad, name)));
    }
  }
  ::onnx::TensorProto proto;
  proto.set_data_type(::onnx::TensorProto::UINT32);
  proto.add_uint64_data(uint64_t{1} << 32);
  EXPECT_THAT([&] { parse_tensor_proto(bytes_of(serialized(proto))); },
              throws_error(ErrorCode::kParse,
                           "TensorProto: uint64_data[0] = 4294967296 does not fit in uint32"));
}

TEST(TensorProto, LargerThanProtobufParses) {
  const Untouched memory(std::size_t{1} << 31);
  ASSERT_TRUE(memory.mapped());
  EXPECT_THAT(
      [&] { parse_tensor_proto(memory.bytes(std::size_t{1} << 31)); },
      throws_exactly(ErrorCode::kLimit,
                     "TensorProto: 2147483648 bytes is more than protobuf can parse (2 GiB)"));
  // One byte less is for protobuf to judge (zeros are not a TensorProto).
  EXPECT_THAT([&] { parse_tensor_proto(memory.bytes((std::size_t{1} << 31) - 1)); },
              throws_exactly(ErrorCode::kParse,
                             "TensorProto: 2147483647 bytes are not a valid protobuf TensorProto"));
}

// Refused before the data is copied, and without protobuf's own complaint on stderr. The limit
// is on the whole message: 2^31 - 16 bytes of data are less than 2 GiB, but not with the name
// (5 bytes), the type (2), the dims (6) and raw_data's tag and length (6).
TEST(TensorProto, LargerThanProtobufSerialises) {
  const Untouched memory(std::size_t{1} << 31);
  ASSERT_TRUE(memory.mapped());
  const std::pair<int64_t, std::string> cases[] = {
      {int64_t{1} << 29,
       "TensorProto 'big': 2147483648 bytes of data make a protobuf of 2147483667 bytes, more "
       "than protobuf can hold (2 GiB)"},
      {(int64_t{1} << 29) - 4,
       "TensorProto 'big': 2147483632 bytes of data make a protobuf of 2147483651 bytes, more "
       "than protobuf can hold (2 GiB)"},
  };
  for (const auto& [count, message] : cases) {
    SCOPED_TRACE(count);
    const Shape shape = {count};
    const ConstTensorView view(DType::kFloat32, shape, memory.data());
    ::testing::internal::CaptureStderr();
    EXPECT_THAT([&] { serialize_tensor_proto(view, "big"); },
                throws_exactly(ErrorCode::kLimit, message));
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  }
}

TEST(TensorProto, TensorFromProtoNamesTheTensorAsTheCallerDoes) {
  ::onnx::TensorProto proto = float_proto({2, 2}, 4);
  const Tensor t = tensor_from_proto(proto, "initializer 'w'");
  EXPECT_THAT(t.values<float>(), ::testing::ElementsAre(0, 1, 2, 3));
  proto.add_float_data(4);
  EXPECT_THAT([&] { tensor_from_proto(proto, "initializer 'w'"); },
              throws_error(ErrorCode::kParse,
                           "initializer 'w': float_data has 5 values, but dims "
                           "[2, 2] of float32 needs 4"));
}

// ---- .npy ---------------------------------------------------------------------------------------

TEST(Npy, RoundTripsEveryDTypeButBFloat16AndEveryShape) {
  uint32_t seed = 100;
  for (DType dtype : kAllDTypes) {
    if (dtype == DType::kBFloat16) continue;
    for (const Shape& shape : test_shapes) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dtype), shape_string(shape)));
      const Tensor t = random_tensor(dtype, shape, seed++);
      const std::string bytes = serialize_npy(t);
      EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
      const std::size_t header_length =
          static_cast<unsigned char>(bytes[8]) + 256u * static_cast<unsigned char>(bytes[9]);
      EXPECT_EQ((10 + header_length) % 64, 0u);
      EXPECT_EQ(bytes.size(), 10 + header_length + t.nbytes());
      EXPECT_EQ(bytes[10 + header_length - 1], '\n');
      expect_same(parse_npy(bytes_of(bytes)), t);
    }
  }
}

TEST(Npy, BytesAreWhatNumpySaveWrites) {
  constexpr float kValues[] = {0, 1, 2, 3, 4, 5};
  const Tensor t = Tensor::from_values<float>({2, 3}, kValues);
  // numpy.save(f, np.arange(6, dtype='<f4').reshape(2, 3)) with numpy 1.24 or later: the dict,
  // 20 spaces left for the first axis to grow (21 digits less the 1 of "2"), 38 more to bring
  // the data to offset 128, a newline; the header length is 118 = 0x76.
  const std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                               "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                               std::string(58, ' ') + "\n" + float_bytes({0, 1, 2, 3, 4, 5});
  EXPECT_EQ(serialize_npy(t), expected);

  // A scalar has no axis to grow: 55 bytes of dict and 62 spaces.
  const std::string scalar = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                             "{'descr': '<f8', 'fortran_order': False, 'shape': (), }" +
                             std::string(62, ' ') + "\n" + std::string("\0\0\0\0\0\0\xf0\x3f", 8);
  EXPECT_EQ(serialize_npy(Tensor::scalar(1.0)), scalar);

  // A 1-D shape keeps Python's trailing comma.
  constexpr int32_t kInts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (10,), }";
  const std::string vector = serialize_npy(Tensor::from_values<int32_t>({10}, kInts));
  EXPECT_EQ(vector.substr(10, dict.size() + 1), dict + " ");

  // Where the growth room decides the length: 10 + 53 + 48 ("(0, 1, ..., 1)") + 20 + 1 bytes
  // pass 128, so numpy 1.24+ pads to 192 (older numpy, without the room, stopped at 128).
  Shape shape(16, 1);
  shape[0] = 0;
  const std::string wide = serialize_npy(Tensor::zeros(DType::kFloat32, shape));
  EXPECT_EQ(wide.size(), 192u);
  EXPECT_EQ(wide.substr(8, 2), std::string("\xb6\x00", 2));  // 182
  EXPECT_EQ(wide.substr(10, 101),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
            "1, 1, 1, 1, 1), }");
  EXPECT_EQ(wide.substr(111), std::string(80, ' ') + "\n");
}

TEST(Npy, DescrOfEveryDType) {
  constexpr std::pair<DType, std::string_view> kDescrs[] = {
      {DType::kFloat32, "<f4"}, {DType::kFloat64, "<f8"}, {DType::kFloat16, "<f2"},
      {DType::kInt32, "<i4"},   {DType::kInt64, "<i8"},   {DType::kUInt32, "<u4"},
      {DType::kUInt64, "<u8"},
  };
  for (const auto& [dtype, descr] : kDescrs) {
    const std::string bytes = serialize_npy(Tensor::zeros(dtype, {1}));
    EXPECT_THAT(bytes, HasSubstr(fmt::format("{{'descr': '{}', ", descr))) << dtype_name(dtype);
  }
}

TEST(Npy, HugeHeadersUseVersion2) {
  // Rank 30000: "(1, 1, ..., 1)" does not fit 1.0's 16-bit header length.
  const Tensor t = Tensor::zeros(DType::kInt32, Shape(30000, 1));
  const std::string bytes = serialize_npy(t);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x02\x00", 8));
  uint32_t header_length;
  std::memcpy(&header_length, bytes.data() + 8, 4);
  EXPECT_GT(header_length, 65535u);
  EXPECT_EQ((12 + header_length) % 64, 0u);
  expect_same(parse_npy(bytes_of(bytes)), t);
}

TEST(Npy, BFloat16HasNoNpyForm) {
  EXPECT_THAT([] { serialize_npy(Tensor::zeros(DType::kBFloat16, {2})); },
              throws_error(ErrorCode::kUnsupported, "npy: bfloat16 has no .npy form; use .pb"));
}

TEST(Npy, ReadsVersions2And3AndHeadersNumpyDidNotWrite) {
  const std::string data = float_bytes({1, 2, 3, 4, 5, 6});
  constexpr float kValues[] = {1, 2, 3, 4, 5, 6};
  constexpr std::string_view kHeaders[] = {
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
      "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",
      "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,3)}",
      " {\t'descr' : '=f4' ,\r\n 'fortran_order' : False , 'shape' : ( 2 , 3 , ) , } \n  ",
      "{'descr': '|f4', 'fortran_order': False, 'shape': (2L, 3L), }",
  };
  for (std::string_view header : kHeaders) {
    for (char major : {'\1', '\2', '\3'}) {
      SCOPED_TRACE(fmt::format("version {}: {}", int{major}, header));
      const Tensor t = parse_npy(bytes_of(npy_file(header, data, major)));
      EXPECT_EQ(t.dtype(), DType::kFloat32);
      EXPECT_EQ(t.shape(), (Shape{2, 3}));
      EXPECT_THAT(t.values<float>(), ::testing::ElementsAreArray(kValues));
    }
  }
  Tensor t = parse_npy(bytes_of(npy_file("{'descr':'<i8','fortran_order':False,'shape':(),}",
                                         std::string("\x07\0\0\0\0\0\0\0", 8))));
  EXPECT_EQ(t.shape(), Shape{});
  EXPECT_EQ(t.data<int64_t>()[0], 7);
  t = parse_npy(bytes_of(npy_file("{'descr':'<u8','fortran_order':False,'shape':(0, 5)}", "")));
  EXPECT_EQ(t.shape(), (Shape{0, 5}));
  EXPECT_EQ(t.dtype(), DType::kUInt64);
}

TEST(Npy, NotAnNpyFile) {
  for (const std::string& bytes : {std::string(), std::string("NUMPY\x01\x00", 7),
                                   std::string("\x93NUMP", 5), std::string("PK\x03\x04 zip")}) {
    EXPECT_THAT([&] { parse_npy(bytes_of(bytes)); },
                throws_error(ErrorCode::kParse,
                             "npy: not a .npy file (it does not start with \"\\x93NUMPY\")"));
  }
}

TEST(Npy, TruncatedPreamble) {
  EXPECT_THAT(
      [] { parse_npy(bytes_of(std::string("\x93NUMPY\x01", 7))); },
      throws_error(ErrorCode::kParse, "npy: truncated: 7 bytes end before the format version"));
  EXPECT_THAT(
      [] { parse_npy(bytes_of(std::string("\x93NUMPY\x01\x00\x10", 9))); },
      throws_error(ErrorCode::kParse, "npy: truncated: 9 bytes end inside the header length"));
  EXPECT_THAT(
      [] { parse_npy(bytes_of(std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11))); },
      throws_error(ErrorCode::kParse, "npy: truncated: 11 bytes end inside the header length"));
}

TEST(Npy, UnknownVersions) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
  for (auto [major, minor, text] : {std::tuple{'\4', '\0', "4.0"}, std::tuple{'\1', '\1', "1.1"},
                                    std::tuple{'\0', '\0', "0.0"}}) {
    std::string bytes = npy_file(header, float_bytes({1}));
    bytes[6] = major;
    bytes[7] = minor;
    EXPECT_THAT([&] { parse_npy(bytes_of(bytes)); },
                throws_error(ErrorCode::kUnsupported,
                             fmt::format("npy: format version {} is not supported (known: 1.0, "
                                         "2.0, 3.0)",
                                         text)));
  }
}

TEST(Npy, HeaderRunsPastTheEnd) {
  std::string bytes = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "");
  bytes.resize(40);
  EXPECT_THAT([&] { parse_npy(bytes_of(bytes)); },
              throws_error(ErrorCode::kParse,
                           "npy: truncated: the header of 56 bytes runs past "
                           "the end of the file (40 bytes)"));
}

TEST(Npy, HeaderLiesAboutTheDataSize) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_THAT([&] { parse_npy(bytes_of(npy_file(header, std::string(20, '\0')))); },
              throws_error(ErrorCode::kParse,
                           "npy: truncated: header shape (2, 3) of '<f4' needs "
                           "24 bytes of data, the file has 20"));
  EXPECT_THAT([&] { parse_npy(bytes_of(npy_file(header, std::string(28, '\0')))); },
              throws_error(ErrorCode::kParse,
                           "npy: 4 bytes follow the 24 bytes of data that "
                           "header shape (2, 3) of '<f4' needs"));
  // 4 TiB claimed, 8 bytes present: refused before anything is allocated.
  EXPECT_THAT(
      [] {
        parse_npy(bytes_of(npy_file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", "12345678")));
      },
      throws_error(ErrorCode::kParse, "needs 4398046511104 bytes of data, the file has 8"));
}

TEST(Npy, NegativeAndOverflowingShapes) {
  EXPECT_THAT(
      [] {
        parse_npy(
            bytes_of(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", "")));
      },
      throws_error(ErrorCode::kParse, "npy: header shape (2, -3) has a negative dimension"));
  EXPECT_THAT(
      [] {
        parse_npy(bytes_of(npy_file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }", "")));
      },
      throws_error(ErrorCode::kLimit,
                   "npy: shape [4611686018427387904, 8] has more elements than fit in 64 bits"));
  EXPECT_THAT(
      [] {
        parse_npy(bytes_of(npy_file(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952, 2), }", "")));
      },
      throws_error(ErrorCode::kLimit,
                   "npy: header shape (2305843009213693952, 2) of float64 "
                   "needs more bytes than fit in 64 bits"));
  EXPECT_THAT(
      [] {
        parse_npy(bytes_of(npy_file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "")));
      },
      throws_error(ErrorCode::kLimit,
                   "npy: header shape entry 99999999999999999999 does not fit in 64 bits"));
  EXPECT_THAT(
      [] {
        parse_npy(bytes_of(npy_file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,), }", "")));
      },
      throws_error(ErrorCode::kLimit, "entry 9223372036854775808 does not fit in 64 bits"));
}

TEST(Npy, BigEndianAndFortranOrderAreRefused) {
  EXPECT_THAT(
      [] {
        parse_npy(bytes_of(
            npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd")));
      },
      throws_error(ErrorCode::kUnsupported,
                   "npy: big-endian data (descr '>f4') is not supported; save it little endian, "
                   "e.g. a.astype('<f4')"));
  EXPECT_THAT(
      [] {
        parse_npy(bytes_of(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                                    std::string(16, '\0'))));
      },
      throws_error(ErrorCode::kUnsupported,
                   "npy: fortran_order True is not supported; save the array in C order"));
}

TEST(Npy, UnsupportedDescrsAreNamed) {
  for (const std::string descr : {"<i2", "|b1", "<c8", "|u1", "<U5", ">i2", "f4", "<f16"}) {
    EXPECT_THAT(
        [&] {
          parse_npy(bytes_of(
              npy_file("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (0,), }", "")));
        },
        throws_error(ErrorCode::kUnsupported,
                     "npy: descr '" + descr +
                         "' is not supported (supported: '<f2', '<f4', '<f8', '<i4', '<i8', "
                         "'<u4', '<u8')"));
  }
  EXPECT_THAT(
      [] {
        parse_npy(bytes_of(npy_file(
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd")));
      },
      throws_error(ErrorCode::kUnsupported, "npy: structured dtypes are not supported"));
}

TEST(Npy, MalformedHeaders) {
  constexpr std::pair<std::string_view, std::string_view> kCases[] = {
      {"{'descr': '<f4', 'fortran_order': False}", "npy: header has no 'shape' entry"},
      {"{'shape': (), 'fortran_order': False}", "npy: header has no 'descr' entry"},
      {"{'descr': '<f4', 'shape': ()}", "npy: header has no 'fortran_order' entry"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}",
       "npy: header has an unexpected key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}",
       "npy: header has 'descr' twice"},
      {"[]", "expected '{' at offset 0"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (5)}",
       "expected ',' after the only dimension, as in (5,) at offset 53"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': ()}", "expected True or False"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': ()}", "expected '}' at offset 17"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3}", "expected ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}", "expected an integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ()} junk",
       "expected the end of the "
       "header at offset 54"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': ()}", "expected '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ()", "expected '}'"},
      {"{'descr': '\\x3cf4', 'fortran_order': False, 'shape': ()}",
       "expected a string without escapes"},
      {"{'descr: '<f4'", "expected ':'"},
      {"{'descr", "expected a closing quote"},
      {"{descr: '<f4'}", "expected a quoted string"},
      {"", "expected '{' at offset 1"},
  };
  for (const auto& test_case : kCases) {
    const std::string_view header = test_case.first;
    EXPECT_THAT([&] { parse_npy(bytes_of(npy_file(header, ""))); },
                throws_error(ErrorCode::kParse, std::string(test_case.second)))
        << header;
  }
  // The message quotes the header, escaped.
  EXPECT_THAT([] { parse_npy(bytes_of(npy_file("{'descr'\x01", ""))); },
              throws_error(ErrorCode::kParse,
                           "npy: cannot parse header \"{'descr'\\x01\\n\": expected ':' at "
                           "offset 8"));
}

// ---- Files --------------------------------------------------------------------------------------

class TensorFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "cumulus_test_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> entries(const fs::path& dir) const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  static std::string contents(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path dir_;
};

TEST_F(TensorFiles, WriteAndReadBothFormats) {
  const Tensor t = random_tensor(DType::kFloat16, {3, 4}, 7);
  write_file_atomic(dir_ / "x.npy", serialize_npy(t));
  write_file_atomic(dir_ / "x.pb", serialize_tensor_proto(t, "input_0"));
  EXPECT_EQ(entries(dir_), (std::vector<std::string>{"x.npy", "x.pb"}));

  std::string name = "stale";
  expect_same(read_tensor_file(dir_ / "x.npy", &name), t);
  EXPECT_EQ(name, "");  // a .npy file holds no name
  expect_same(read_tensor_file(dir_ / "x.pb", &name), t);
  EXPECT_EQ(name, "input_0");
  expect_same(read_tensor_file(dir_ / "x.pb"), t);
}

TEST_F(TensorFiles, ErrorsNameTheFile) {
  write_file_atomic(dir_ / "bad.npy", "\x93NUMPY\x01");
  EXPECT_THAT([&] { read_tensor_file(dir_ / "bad.npy"); },
              throws_error(ErrorCode::kParse,
                           fmt::format("tensor file '{}': truncated: 7 bytes end before the format "
                                       "version",
                                       (dir_ / "bad.npy").string())));

  write_file_atomic(dir_ / "neg.npy",
                    npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", ""));
  EXPECT_THAT([&] { read_tensor_file(dir_ / "neg.npy"); },
              throws_error(ErrorCode::kParse,
                           fmt::format("tensor file '{}': header shape (2, -3) has a negative "
                                       "dimension",
                                       (dir_ / "neg.npy").string())));

  write_file_atomic(dir_ / "bad.pb", serialized(float_proto({2, -3}, 0)));
  EXPECT_THAT([&] { read_tensor_file(dir_ / "bad.pb"); },
              throws_error(ErrorCode::kParse,
                           fmt::format("tensor file '{}' (TensorProto 'x'): dims [2, -3] has a "
                                       "negative dimension",
                                       (dir_ / "bad.pb").string())));

  write_file_atomic(dir_ / "junk.pb", "\xff\xff");
  EXPECT_THAT([&] { read_tensor_file(dir_ / "junk.pb"); },
              throws_error(ErrorCode::kParse,
                           fmt::format("tensor file '{}': 2 bytes are not a valid protobuf "
                                       "TensorProto",
                                       (dir_ / "junk.pb").string())));
}

// A .pb file larger than protobuf parses is refused by its size before it is read: with the
// memory limit below its size, reading it first would report the limit instead.
TEST_F(TensorFiles, ProtobufFilesOverTwoGiBAreRefusedBeforeTheyAreRead) {
  const fs::path path = dir_ / "big.pb";
  write_file_atomic(path, "");
  fs::resize_file(path, (std::uintmax_t{1} << 31) + 1);  // a hole: no disk, no memory
  const auto saved = memory_limit();
  set_memory_limit(std::size_t{1} << 20);
  EXPECT_THAT([&] { read_tensor_file(path); },
              throws_exactly(ErrorCode::kLimit,
                             fmt::format("tensor file '{}': 2147483649 bytes is more than "
                                         "protobuf can parse (2 GiB)",
                                         path.string())));
  set_memory_limit(saved);
}

TEST_F(TensorFiles, UnknownExtensions) {
  for (const std::string file : {"x.txt", "x.NPY", "x.npz", "x"}) {
    const std::string ext = fs::path(file).extension().string();
    EXPECT_THAT(
        [&] { read_tensor_file(dir_ / file); },
        throws_error(ErrorCode::kInvalidArgument,
                     fmt::format("tensor file '{}': cannot tell the format from {} "
                                 "(accepted: .npy for NumPy, .pb for ONNX TensorProto)",
                                 (dir_ / file).string(),
                                 ext.empty() ? "a name without extension" : "'" + ext + "'")));
  }
}

TEST_F(TensorFiles, ReadFile) {
  const std::string bytes("a\0b\xff\n", 5);
  write_file_atomic(dir_ / "f", bytes);
  EXPECT_EQ(read_file(dir_ / "f"), bytes);
  write_file_atomic(dir_ / "empty", "");
  EXPECT_EQ(read_file(dir_ / "empty"), "");
  const std::string big(3 << 20, 'z');
  write_file_atomic(dir_ / "big", big);
  EXPECT_EQ(read_file(dir_ / "big"), big);
}

TEST_F(TensorFiles, ReadFileErrorsNameThePathAndTheReason) {
  EXPECT_THAT(
      [&] { read_file(dir_ / "missing.npy"); },
      throws_error(ErrorCode::kIo, fmt::format("cannot read '{}': No such file or directory",
                                               (dir_ / "missing.npy").string())));
  EXPECT_THAT([&] { read_tensor_file(dir_ / "missing.pb"); },
              throws_error(ErrorCode::kIo, "missing.pb': No such file or directory"));
  fs::create_directory(dir_ / "folder.npy");
  EXPECT_THAT([&] { read_tensor_file(dir_ / "folder.npy"); },
              throws_error(ErrorCode::kIo, fmt::format("cannot read '{}': Is a directory",
                                                       (dir_ / "folder.npy").string())));
}

TEST_F(TensorFiles, WriteFileAtomicReplacesAndLeavesNoTemporary) {
  const fs::path target = dir_ / "out.bin";
  write_file_atomic(target, "first");
  EXPECT_EQ(contents(target), "first");
  write_file_atomic(target, std::string("second\0", 7));
  EXPECT_EQ(contents(target), std::string("second\0", 7));
  EXPECT_EQ(entries(dir_), std::vector<std::string>{"out.bin"});
}

TEST_F(TensorFiles, WriteFileAtomicCreatesFilesWithTheUmasksPermissions) {
  const mode_t old_mask = ::umask(022);
  write_file_atomic(dir_ / "out.bin", "x");
  ::umask(old_mask);
  EXPECT_EQ(fs::status(dir_ / "out.bin").permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
}

TEST_F(TensorFiles, WriteFileAtomicRelativePath) {
  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir_);
  write_file_atomic("relative.bin", "abc");
  fs::current_path(old_cwd);
  EXPECT_EQ(contents(dir_ / "relative.bin"), "abc");
  EXPECT_EQ(entries(dir_), std::vector<std::string>{"relative.bin"});
}

TEST_F(TensorFiles, WriteFileAtomicIntoAMissingFolderCreatesNothing) {
  const fs::path target = dir_ / "no" / "such" / "out.bin";
  EXPECT_THAT([&] { write_file_atomic(target, "data"); },
              throws_error(ErrorCode::kIo,
                           fmt::format("cannot write '{}': cannot create a temporary file in "
                                       "'{}': No such file or directory",
                                       target.string(), (dir_ / "no" / "such").string())));
  EXPECT_TRUE(entries(dir_).empty());
}

TEST_F(TensorFiles, WriteFileAtomicUnderARegularFileChangesNothing) {
  write_file_atomic(dir_ / "file", "keep");
  EXPECT_THAT([&] { write_file_atomic(dir_ / "file" / "out.bin", "data"); },
              throws_error(ErrorCode::kIo, "Not a directory"));
  EXPECT_EQ(contents(dir_ / "file"), "keep");
  EXPECT_EQ(entries(dir_), std::vector<std::string>{"file"});
}

TEST_F(TensorFiles, FailedRenameRemovesTheTemporary) {
  fs::create_directories(dir_ / "taken" / "inside");
  EXPECT_THAT(
      [&] { write_file_atomic(dir_ / "taken", "data"); },
      throws_error(ErrorCode::kIo, fmt::format("cannot write '{}': cannot rename '.taken.tmp",
                                               (dir_ / "taken").string())));
  EXPECT_EQ(entries(dir_), std::vector<std::string>{"taken"});
  EXPECT_EQ(entries(dir_ / "taken"), std::vector<std::string>{"inside"});
}

// A write that fails midway (here: past the file size limit) leaves the old file as it was.
TEST_F(TensorFiles, FailedWriteKeepsTheOldFile) {
  const fs::path target = dir_ / "out.bin";
  write_file_atomic(target, "old contents");

  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = 4096;
  // Without this the kernel stops the process with SIGXFSZ instead of failing the write.
  const auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string big(1 << 20, 'n');
  EXPECT_THAT([&] { write_file_atomic(target, big); },
              throws_error(ErrorCode::kIo, fmt::format("cannot write '{}': write failed: File too "
                                                       "large",
                                                       target.string())));
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);

  EXPECT_EQ(contents(target), "old contents");
  EXPECT_EQ(entries(dir_), std::vector<std::string>{"out.bin"});
}

}  // namespace
}  // namespace cumulus::onnx
