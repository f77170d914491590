// Hostile inputs: models that point at files outside themselves, tensor files cut short at every
// byte, headers that claim enormous shapes, and a model whose broadcast asks for terabytes. Each
// must end in a clear cumulus::Error, never a crash, a read of a file the model names, or an
// attempt to allocate what the input claims.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cumulus/error.h"
#include "cumulus/onnx.h"
#include "cumulus/tensor.h"
#include "model_builder.h"

namespace cumulus::onnx {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace model_builder;

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// The cumulus::Error `f` throws; a test failure (and a kInvalidArgument placeholder) otherwise.
template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than cumulus::Error: " << e.what();
    return Error(ErrorCode::kInvalidArgument, "<not a cumulus::Error>");
  }
  ADD_FAILURE() << "did not throw";
  return Error(ErrorCode::kInvalidArgument, "<no error>");
}

// Restores the memory limit when a test that lowers it ends.
class MemoryLimitGuard {
 public:
  MemoryLimitGuard() : saved_(memory_limit()) {}
  MemoryLimitGuard(const MemoryLimitGuard&) = delete;
  MemoryLimitGuard& operator=(const MemoryLimitGuard&) = delete;
  ~MemoryLimitGuard() { set_memory_limit(saved_); }

 private:
  std::size_t saved_;
};

// ---- External data ------------------------------------------------------------------------------

// A float32 [2] initializer 'w' whose values live in `location`.
::onnx::TensorProto external_weights(const std::string& location) {
  ::onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(kFloat);
  t.add_dims(2);
  t.set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* entry = t.add_external_data();
  entry->set_key("location");
  entry->set_value(location);
  entry = t.add_external_data();
  entry->set_key("length");
  entry->set_value("8");
  return t;
}

// y = x + w, with w an initializer in external data; written next to its data.
fs::path write_external_model(const fs::path& dir, const std::string& location, bool used = true) {
  ModelBuilder b(14);
  b.input("x", kFloat, std::vector<Dim>{2}).output("y", kFloat);
  b.initializer(external_weights(location));
  b.node(used ? "Sum" : "Identity",
         used ? std::vector<std::string>{"x", "w"} : std::vector<std::string>{"x"}, {"y"});
  fs::path path = dir / "model.onnx";
  b.write(path);
  return path;
}

TEST(HostileExternalData, EveryLocationIsRefusedNamingTheTensor) {
  TempDir dir;
  // Real files at the relative locations, with exactly the bytes the tensor needs, so nothing but
  // the refusal itself can stop a load: a plain file next to the model and a symlink out of it.
  const float values[2] = {1, 2};
  ModelBuilder::write_bytes(dir / "weights.bin",
                            std::string(reinterpret_cast<const char*>(values), sizeof values));
  fs::create_symlink("/etc/passwd", dir / "escape.bin");
  fs::create_directories(dir / "sub");
  for (const std::string location :
       {"/etc/passwd", "../../etc/passwd", "escape.bin", "weights.bin", "sub/../weights.bin", ""}) {
    SCOPED_TRACE("location '" + location + "'");
    const fs::path model = write_external_model(dir.path(), location);
    const Error e = error_of([&] { Model::load(model); });
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("initializer 'w'"),
                                HasSubstr(fmt::format("external data (location '{}') is not "
                                                      "supported",
                                                      location)),
                                HasSubstr("store the values in the tensor itself")));
    // Nothing of /etc/passwd leaks into the message.
    EXPECT_THAT(e.what(), Not(HasSubstr("root:")));
  }
}

TEST(HostileExternalData, RefusedEvenWhenNothingReadsTheInitializer) {
  TempDir dir;
  const fs::path model = write_external_model(dir.path(), "/etc/passwd", /*used=*/false);
  const Error e = error_of([&] { Model::load(model); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("initializer 'w'"),
                              HasSubstr("external data (location '/etc/passwd')")));
}

TEST(HostileExternalData, DataLocationWithoutEntriesAndConstantsAreRefused) {
  ::onnx::TensorProto t = external_weights("weights.bin");
  t.clear_external_data();
  {
    ModelBuilder b(14);
    b.input("x", kFloat, std::vector<Dim>{2}).output("y", kFloat);
    b.initializer(t);
    b.node("Sum", {"x", "w"}, {"y"});
    const std::string bytes = b.bytes();
    const Error e = error_of([&] { Model::parse(bytes_of(bytes)); });
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("initializer 'w'"),
                                HasSubstr("external data (data_location EXTERNAL)")));
  }
  {
    ModelBuilder b(14);
    b.input("x", kFloat, std::vector<Dim>{2}).output("y", kFloat);
    b.constant("w", external_weights("/etc/shadow"));
    b.node("Sum", {"x", "w"}, {"y"}, "add");
    const std::string bytes = b.bytes();
    const Error e = error_of([&] { Model::parse(bytes_of(bytes)); });
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("Constant node #0 (Constant)"),
                                HasSubstr("external data (location '/etc/shadow')")));
  }
}

// A tensor file given to the reader directly is refused the same way.
TEST(HostileExternalData, TensorFilesAreRefused) {
  TempDir dir;
  const fs::path pb = dir / "w.pb";
  ::onnx::TensorProto t = external_weights("/etc/passwd");
  std::string bytes;
  ASSERT_TRUE(t.SerializeToString(&bytes));
  ModelBuilder::write_bytes(pb, bytes);
  const Error e = error_of([&] { read_tensor_file(pb); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), AllOf(HasSubstr(pb.string()), HasSubstr("TensorProto 'w'"),
                              HasSubstr("external data (location '/etc/passwd')")));
}

// ---- Truncated tensor files ---------------------------------------------------------------------

std::string valid_npy() {
  const std::vector<float> v = {1.5f, -2, 3, 4, 5, 6};
  const Shape shape = {2, 3};
  return serialize_npy(ConstTensorView(DType::kFloat32, shape, v.data()));
}

std::string valid_pb() {
  const std::vector<int64_t> v = {-1, 0, 1, std::numeric_limits<int64_t>::max()};
  const Shape shape = {2, 2};
  return serialize_tensor_proto(ConstTensorView(DType::kInt64, shape, v.data()), "values");
}

TEST(HostileTensorFiles, NpyTruncatedAtEveryByteIsAParseError) {
  const std::string full = valid_npy();
  ASSERT_NO_THROW(parse_npy(bytes_of(full)));
  TempDir dir;
  for (std::size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(fmt::format("{} of {} bytes", n, full.size()));
    const std::string cut = full.substr(0, n);
    const Error e = error_of([&] { parse_npy(bytes_of(cut)); });
    EXPECT_EQ(e.code(), ErrorCode::kParse) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("npy: "));
    // The same through a file: the error names it.
    const fs::path file = dir / "cut.npy";
    ModelBuilder::write_bytes(file, cut);
    const Error f = error_of([&] { read_tensor_file(file); });
    EXPECT_EQ(f.code(), ErrorCode::kParse) << f.what();
    EXPECT_THAT(f.what(), HasSubstr(file.string()));
  }
}

// Cut at a field boundary, a TensorProto is still a well-formed protobuf, only with fewer fields.
// Cut before its data_type (at byte 0, or right after the dims) it has none, which the reader
// reports as the unsupported type "undefined" (kUnsupported, with the type's name); every other
// cut is a parse error.
TEST(HostileTensorFiles, TensorProtoTruncatedAtEveryByteIsRefused) {
  const std::string full = valid_pb();
  ASSERT_NO_THROW(parse_tensor_proto(bytes_of(full)));
  TempDir dir;
  int without_type = 0;
  for (std::size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(fmt::format("{} of {} bytes", n, full.size()));
    const std::string cut = full.substr(0, n);
    ::onnx::TensorProto proto;
    const bool typeless = proto.ParseFromString(cut) && !proto.has_data_type();
    const Error e = error_of([&] { parse_tensor_proto(bytes_of(cut)); });
    if (typeless) {
      ++without_type;
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("data type undefined (0) is not supported"));
    } else {
      EXPECT_EQ(e.code(), ErrorCode::kParse) << e.what();
    }
    const fs::path file = dir / "cut.pb";
    ModelBuilder::write_bytes(file, cut);
    const Error f = error_of([&] { read_tensor_file(file); });
    EXPECT_EQ(f.code(), e.code()) << f.what();
    EXPECT_THAT(f.what(), HasSubstr(file.string()));
  }
  EXPECT_EQ(without_type, 3);  // empty, after the first dim, after both dims
}

// ---- Enormous claims ----------------------------------------------------------------------------

// A .npy file whose header claims `shape_text` of float32, followed by `data`.
std::string npy_claiming(const std::string& shape_text, const std::string& data = "12345678") {
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}", shape_text);
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header + data;
}

TEST(HostileTensorFiles, HugeNpyShapesAreRefusedBeforeAllocating) {
  // With a limit far below every claim, an attempt to allocate first would fail with the limit's
  // message instead of these.
  MemoryLimitGuard guard;
  set_memory_limit(4096);
  struct Case {
    std::string shape;
    ErrorCode code;
    std::string message;
  };
  const Case cases[] = {
      {"(1099511627776,)", ErrorCode::kParse,
       "header shape (1099511627776,) of '<f4' needs 4398046511104 bytes of data, the file has 8"},
      {"(1048576, 1048576, 1024)", ErrorCode::kParse,
       "needs 4503599627370496 bytes of data, the file has 8"},
      {"(4611686018427387904,)", ErrorCode::kLimit, "needs more bytes than fit in 64 bits"},
      {"(4294967296, 4294967296)", ErrorCode::kLimit, "has more elements than fit in 64 bits"},
      {"(99999999999999999999,)", ErrorCode::kLimit, "does not fit in 64 bits"},
      {"(0, 9223372036854775807)", ErrorCode::kParse, "8 bytes follow the 0 bytes of data"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.shape);
    const Error e = error_of([&] { parse_npy(bytes_of(npy_claiming(c.shape))); });
    EXPECT_EQ(e.code(), c.code) << e.what();
    EXPECT_THAT(e.what(), AllOf(HasSubstr(c.message), Not(HasSubstr("memory limit"))));
  }
}

TEST(HostileTensorFiles, TensorLargerThanTheMemoryLimitIsRefusedWithItsSize) {
  MemoryLimitGuard guard;
  set_memory_limit(1024);
  // 512 float32 values, 2048 bytes, all present in the file.
  const std::string bytes = npy_claiming("(512,)", std::string(2048, '\0'));
  const Error e = error_of([&] { parse_npy(bytes_of(bytes)); });
  EXPECT_EQ(e.code(), ErrorCode::kLimit);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("2048 bytes"), HasSubstr("memory limit of 1024 bytes")));
}

// y = a + b with a [2^20, 1] and b [1, 2^20] float32: 8 MiB of inputs, 4 TiB of output.
ModelBuilder enormous_broadcast() {
  ModelBuilder b(13);
  b.input("a", kFloat, std::vector<Dim>{int64_t{1} << 20, 1});
  b.input("b", kFloat, std::vector<Dim>{1, int64_t{1} << 20});
  b.node("Sum", {"a", "b"}, {"y"});
  b.output("y", kFloat);
  return b;
}

TEST(HostileModels, EnormousBroadcastIsALimitErrorNamingTheBytes) {
  const std::string bytes = enormous_broadcast().bytes();
  const Model model = Model::parse(bytes_of(bytes));
  const Tensor a = Tensor::zeros(DType::kFloat32, {int64_t{1} << 20, 1});
  const Tensor b = Tensor::zeros(DType::kFloat32, {1, int64_t{1} << 20});
  const std::map<std::string, ConstTensorView, std::less<>> feeds = {{"a", a.view()},
                                                                     {"b", b.view()}};
  const Error e = error_of([&] { model.run(feeds); });
  EXPECT_EQ(e.code(), ErrorCode::kLimit);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("4398046511104 bytes"), HasSubstr("[1048576, 1048576]"),
                              HasSubstr("node #0 (Sum)")));
}

// y = a + b + c broadcast to [2^15, 2^15, 2^15] float32: 128 TiB, more address space than a
// process has. With the memory limit above it, the allocation itself fails.
TEST(HostileModels, BroadcastTooLargeToAllocateNamesTheNode) {
  MemoryLimitGuard guard;
  set_memory_limit(SIZE_MAX);
  ModelBuilder b(13);
  b.input("a", kFloat, std::vector<Dim>{32768, 1, 1});
  b.input("b", kFloat, std::vector<Dim>{1, 32768, 1});
  b.input("c", kFloat, std::vector<Dim>{1, 1, 32768});
  b.node("Sum", {"a", "b", "c"}, {"y"});
  b.output("y", kFloat);
  const std::string bytes = b.bytes();
  const Model model = Model::parse(bytes_of(bytes));
  const Tensor a = Tensor::zeros(DType::kFloat32, {32768, 1, 1});
  const Tensor bt = Tensor::zeros(DType::kFloat32, {1, 32768, 1});
  const Tensor c = Tensor::zeros(DType::kFloat32, {1, 1, 32768});
  const std::map<std::string, ConstTensorView, std::less<>> feeds = {
      {"a", a.view()}, {"b", bt.view()}, {"c", c.view()}};
  const Error e = error_of([&] { model.run(feeds); });
  EXPECT_EQ(e.code(), ErrorCode::kLimit);
  EXPECT_STREQ(e.what(),
               "cannot allocate 140737488355328 bytes for a float32 tensor of shape [32768, 32768, "
               "32768] (node #0 (Sum): data_0='a', data_1='b', data_2='c')");
}

// ---- The command line ---------------------------------------------------------------------------

struct CliResult {
  int status = -1;
  std::string err;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CliResult cli(const TempDir& dir, const std::vector<std::string>& args) {
  std::string command = shell_quote(CUMULUS_CLI);
  for (const auto& a : args) command += " " + shell_quote(a);
  const fs::path err = dir / "stderr.txt";
  command += " >/dev/null 2>" + shell_quote(err.string()) + " </dev/null";
  const int raw = std::system(command.c_str());
  CliResult r;
  r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream f(err, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  r.err = s.str();
  return r;
}

TEST(HostileCli, EnormousBroadcastExitsOneWithOneLine) {
  TempDir dir;
  const fs::path model = dir / "broadcast.onnx";
  enormous_broadcast().write(model);
  const CliResult r = cli(dir, {"run", model.string(), "--input", "a=random:1048576x1", "--input",
                                "b=random:1x1048576"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, AllOf(HasSubstr("error: "), HasSubstr("4398046511104 bytes")));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(HostileCli, ExternalDataExitsOneNamingTheTensor) {
  TempDir dir;
  const fs::path model = write_external_model(dir.path(), "../../etc/passwd");
  const CliResult r = cli(dir, {"run", model.string(), "--input", "x=random:2"});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, AllOf(HasSubstr("initializer 'w'"),
                           HasSubstr("external data (location '../../etc/passwd')")));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Names in a model are the model's to choose: a newline or a terminal escape in one must not
// break the CLI's one line per error, nor reach the terminal raw.
TEST(HostileCli, ControlCharactersInNamesStayOnOneLine) {
  TempDir dir;
  const fs::path model = dir / "names.onnx";
  ModelBuilder b(14);
  b.input("x", kFloat, std::vector<Dim>{2}).output("y", kFloat);
  b.initializer(external_weights("evil\nerror: forged line\x1b[2J"));
  b.node("Sum", {"x", "w"}, {"y"});
  b.write(model);
  const CliResult r = cli(dir, {"run", model.string(), "--input", "x=random:2"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, AllOf(HasSubstr("evil\\nerror: forged line\\x1b[2J"), Not(HasSubstr("\x1b"))));
}

}  // namespace
}  // namespace cumulus::onnx

// AddressSanitizer's allocator must fail as the system's does, not abort, for the allocation
// failure tested above.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif
