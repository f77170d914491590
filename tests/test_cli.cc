// The cumulus executable, run as users run it: exit status, stdout, stderr and the files it
// writes.
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"
#include "cumulus/error.h"
#include "cumulus/onnx.h"
#include "model_builder.h"

namespace cumulus {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace model_builder;

// ---- Running the executable ---------------------------------------------------------------------

using cli_runner::cli;
using cli_runner::read_all;
using cli_runner::Result;

// A cumulus process started without a shell, so a test can limit it and signal it.
struct Child {
  pid_t pid = -1;
  fs::path out, err;
};

struct Limits {
  std::optional<rlim_t> file_size;      // RLIMIT_FSIZE, bytes
  std::optional<rlim_t> address_space;  // RLIMIT_AS, bytes
};

// Starts `cumulus args...` with stdout and stderr going to files and `limits` applied to it
// alone. Under a file size limit SIGXFSZ is ignored, so a write past the limit fails with EFBIG
// instead of killing the process.
Child start(const std::vector<std::string>& args, const Limits& limits = {}) {
  static const TempDir capture;
  static int calls = 0;
  Child child{-1, capture / fmt::format("out{}", calls), capture / fmt::format("err{}", calls)};
  ++calls;
  std::vector<std::string> words = {CUMULUS_CLI};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  // Everything is prepared above: between fork and exec the child makes system calls only.
  child.pid = ::fork();
  if (child.pid != 0) return child;
  const auto limit = [](int resource, std::optional<rlim_t> bytes) {
    const rlimit value{*bytes, *bytes};
    return !bytes || ::setrlimit(resource, &value) == 0;
  };
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  const int in = ::open("/dev/null", O_RDONLY);
  const int out = ::open(child.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = ::open(child.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!limit(RLIMIT_FSIZE, limits.file_size) || !limit(RLIMIT_AS, limits.address_space) ||
      ::sigaction(SIGXFSZ, &ignore, nullptr) != 0 || in < 0 || out < 0 || err < 0 ||
      ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) {
    ::_exit(126);
  }
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

// `raw` is the child's wait status.
Result result_of(const Child& child, int raw) {
  Result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.signal = WIFSIGNALED(raw) ? WTERMSIG(raw) : 0;
  r.out = read_all(child.out);
  r.err = read_all(child.err);
  return r;
}

Result finish(const Child& child) {
  int raw = 0;
  if (::waitpid(child.pid, &raw, 0) != child.pid) ADD_FAILURE() << "waitpid: " << errno;
  return result_of(child, raw);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line);) lines.push_back(line);
  return lines;
}

// Bad input: status 1 and exactly one line on stderr, "error: ...".
void expect_one_error_line(const Result& r, int status = 1) {
  EXPECT_EQ(r.status, status) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_THAT(r.err, StartsWith("error: "));
  EXPECT_THAT(r.err, EndsWith("\n"));
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
}

// ---- Files --------------------------------------------------------------------------------------

template <class T>
Tensor make(const Shape& shape, const std::vector<T>& values) {
  return Tensor::from_values<T>(shape, std::span<const T>(values));
}

void write(const fs::path& path, const std::string& bytes) {
  ModelBuilder::write_bytes(path, bytes);
}

Tensor read_npy(const fs::path& path) {
  const std::string bytes = read_all(path);
  return onnx::parse_npy(std::as_bytes(std::span(bytes)));
}
Tensor read_pb(const fs::path& path, std::string* name) {
  const std::string bytes = read_all(path);
  return onnx::parse_tensor_proto(std::as_bytes(std::span(bytes)), name);
}

template <class T>
std::vector<T> values_of(const Tensor& t) {
  EXPECT_EQ(t.dtype(), dtype_of<T>);
  if (t.dtype() != dtype_of<T>) return {};
  return std::vector<T>(t.values<T>().begin(), t.values<T>().end());
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// y = CumSum(x, axis): x float64 of any shape, axis a 0-D int64.
ModelBuilder cumsum_model() {
  ModelBuilder b(14);
  b.input("x", kDouble).input("axis", kInt64, std::vector<Dim>{}).output("y", kDouble);
  b.node("CumSum", {"x", "axis"}, {"y"}, "scan");
  return b;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    cumsum_model().write(model_);
    write(x_npy_, onnx::serialize_npy(x_));
  }

  TempDir dir_;
  const fs::path model_ = dir_ / "cumsum.onnx";
  const Tensor x_ = make<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  const fs::path x_npy_ = dir_ / "x.npy";
  // The seed page's CumSum of [[1, 2, 3], [4, 5, 6]] along axis 1, as `run` prints it.
  const std::string y_text_ =
      "y: shape=(2, 3), dtype=float64\n"
      "  [[ 1.,  3.,  6.],\n"
      "   [ 4.,  9., 15.]]\n";
  const std::vector<double> y_ = {1, 3, 6, 4, 9, 15};
};

// ---- Usage --------------------------------------------------------------------------------------

TEST_F(Cli, HelpExitsZero) {
  const Result top = cli({"--help"});
  EXPECT_EQ(top.status, 0);
  EXPECT_THAT(top.out,
              AllOf(HasSubstr("Usage"), HasSubstr("run"), HasSubstr("test"), HasSubstr("perf")));
  const Result run = cli({"run", "--help"});
  EXPECT_EQ(run.status, 0);
  EXPECT_THAT(run.out, AllOf(HasSubstr("Usage"), HasSubstr("--input"), HasSubstr("--output-dir"),
                             HasSubstr("--output-format"), HasSubstr("--threads")));
  const Result test = cli({"test", "--help"});
  EXPECT_EQ(test.status, 0);
  EXPECT_THAT(test.out, HasSubstr("Usage"));
  const Result perf = cli({"perf", "--help"});
  EXPECT_EQ(perf.status, 0);
  EXPECT_THAT(perf.out, AllOf(HasSubstr("Usage"), HasSubstr("--iterations"), HasSubstr("--warmup"),
                              HasSubstr("--json")));
}

TEST_F(Cli, UsageErrorsExitTwo) {
  const std::string m = model_.string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"frobnicate"},
           {"run"},
           {"run", m, "--bogus"},
           {"run", m, "--threads", "0"},
           {"run", m, "--threads", "-1"},
           {"run", m, "--threads", "abc"},
           {"run", m, "--threads", "257"},
           {"test", dir_.path().string(), "--threads", "two"},
           {"perf", m, "--iterations", "0"},
           {"run", m, "--output-format", "csv"},
       }) {
    SCOPED_TRACE(fmt::format("cumulus {}", fmt::join(args, " ")));
    const Result r = cli(args);
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    EXPECT_FALSE(r.err.empty());
  }
}

TEST_F(Cli, MalformedInputSpecsExitTwo) {
  const std::string m = model_.string();
  for (const auto& spec : {"x", "=1", "x=", "x=random:2xq", "x=random:", "x=random:-2",
                           "axis=const:abc", "axis=const:1.5", "axis=const:"}) {
    SCOPED_TRACE(spec);
    const Result r = cli({"run", m, "--input", spec});
    expect_one_error_line(r, 2);
    EXPECT_THAT(r.err, HasSubstr(spec));
  }
  const Result twice = cli({"run", m, "-i", "axis=const:1", "-i", "axis=const:0"});
  expect_one_error_line(twice, 2);
  EXPECT_THAT(twice.err, HasSubstr("'axis' is given twice"));
}

// ---- run ----------------------------------------------------------------------------------------

TEST_F(Cli, RunPrintsLikeTheSeedPages) {
  const Result npy =
      cli({"run", model_.string(), "--input", "x=" + x_npy_.string(), "--input", "axis=const:1"});
  EXPECT_EQ(npy.status, 0) << npy.err;
  EXPECT_EQ(npy.out, y_text_);
  EXPECT_EQ(npy.err, "");

  // The same from TensorProto files.
  write(dir_ / "x.pb", onnx::serialize_tensor_proto(x_, "x"));
  write(dir_ / "axis.pb", onnx::serialize_tensor_proto(Tensor::scalar<int64_t>(1), "axis"));
  const Result pb = cli({"run", model_.string(), "-i", "x=" + (dir_ / "x.pb").string(), "-i",
                         "axis=" + (dir_ / "axis.pb").string()});
  EXPECT_EQ(pb.status, 0) << pb.err;
  EXPECT_EQ(pb.out, y_text_);

  const Result axis0 =
      cli({"run", model_.string(), "-i", "x=" + x_npy_.string(), "-i", "axis=const:0"});
  EXPECT_EQ(axis0.out,
            "y: shape=(2, 3), dtype=float64\n"
            "  [[1., 2., 3.],\n"
            "   [5., 7., 9.]]\n");
}

TEST_F(Cli, RunWithRandomAndConstInputs) {
  const std::vector<std::string> args = {"run", model_.string(), "-i", "x=random:2x3",
                                         "-i",  "axis=const:-1"};
  const Result r = cli(args);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("y: shape=(2, 3), dtype=float64\n"));
  EXPECT_EQ(lines_of(r.out).size(), 3u) << r.out;
  // The default seed makes the same values every time; another seed, other values.
  EXPECT_EQ(cli(args).out, r.out);
  auto seeded = args;
  seeded.insert(seeded.end(), {"--seed", "12345"});
  const Result other = cli(seeded);
  EXPECT_EQ(other.status, 0);
  EXPECT_NE(other.out, r.out);
  EXPECT_EQ(cli(seeded).out, other.out);

  // A rank-0 Sum input from random:scalar, a float from const:V.
  ModelBuilder b(13);
  b.input("a", kDouble, std::vector<Dim>{}).input("c", kDouble, std::vector<Dim>{});
  b.input("m", kDouble, std::vector<Dim>{2, 3}).output("a").output("s");
  b.node("Sum", {"m", "a", "c"}, {"s"});
  b.write(dir_ / "sum.onnx");
  const fs::path out = dir_ / "out";
  const Result sum =
      cli({"run", (dir_ / "sum.onnx").string(), "-i", "a=random:scalar", "-i", "c=const:2.5", "-i",
           "m=" + x_npy_.string(), "--output-dir", out.string()});
  ASSERT_EQ(sum.status, 0) << sum.err;
  const Tensor a = read_npy(out / "a.npy");
  EXPECT_EQ(a.shape(), Shape{});
  ASSERT_EQ(a.dtype(), DType::kFloat64);
  const double av = *a.data<double>();
  EXPECT_GE(av, -1.0);
  EXPECT_LE(av, 1.0);
  const Tensor s = read_npy(out / "s.npy");
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  std::vector<double> want;
  for (double v : {1, 2, 3, 4, 5, 6}) want.push_back(v + av + 2.5);
  EXPECT_EQ(values_of<double>(s), want);

  const Result printed = cli({"run", (dir_ / "sum.onnx").string(), "-i", "a=random:scalar", "-i",
                              "c=const:2.5", "-i", "m=" + x_npy_.string()});
  EXPECT_EQ(printed.status, 0) << printed.err;
  EXPECT_THAT(printed.out, AllOf(StartsWith("a: shape=(), dtype=float64\n"),
                                 HasSubstr("\ns: shape=(2, 3), dtype=float64\n")));
}

// normal:DIMS and unit:DIMS: standard normal and uniform [0, 1) terms, for floating inputs only.
TEST_F(Cli, NormalAndUnitInputs) {
  ModelBuilder b(13);
  b.input("n", kFloat, std::vector<Dim>{4096}).input("u", kFloat, std::vector<Dim>{4096});
  b.input("k", kInt32, std::vector<Dim>{4}).output("n").output("u").output("k");
  b.write(dir_ / "values.onnx");
  const std::string m = (dir_ / "values.onnx").string();
  const fs::path out = dir_ / "out";
  const Result r = cli({"run", m, "-i", "n=normal:4096", "-i", "u=unit:4096", "-i", "k=random:4",
                        "-o", out.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto moments = [](const std::vector<float>& v) {
    double sum = 0, squares = 0;
    for (float x : v) sum += x;
    const double mean = sum / static_cast<double>(v.size());
    for (float x : v) squares += (x - mean) * (x - mean);
    return std::pair(mean, std::sqrt(squares / static_cast<double>(v.size())));
  };
  const std::vector<float> n = values_of<float>(read_npy(out / "n.npy"));
  ASSERT_EQ(n.size(), 4096u);
  const auto [n_mean, n_sd] = moments(n);
  // Over 4096 draws the mean's standard error is 1/64, the deviation's about 1/90.
  EXPECT_NEAR(n_mean, 0.0, 0.08);
  EXPECT_NEAR(n_sd, 1.0, 0.06);
  EXPECT_GT(std::ranges::count_if(n, [](float x) { return std::fabs(x) > 2; }), 40);
  const std::vector<float> u = values_of<float>(read_npy(out / "u.npy"));
  ASSERT_EQ(u.size(), 4096u);
  EXPECT_TRUE(std::ranges::all_of(u, [](float x) { return x >= 0 && x < 1; }));
  const auto [u_mean, u_sd] = moments(u);
  EXPECT_NEAR(u_mean, 0.5, 0.03);
  EXPECT_NEAR(u_sd, std::sqrt(1.0 / 12), 0.03);

  for (const char* spec : {"k=normal:4", "k=unit:4"}) {
    const Result bad = cli({"run", m, "-i", "n=normal:4096", "-i", "u=unit:4096", "-i", spec});
    expect_one_error_line(bad, 2);
    EXPECT_THAT(bad.err, AllOf(HasSubstr(spec), HasSubstr("'k' is int32"), HasSubstr("random:")));
  }
  for (const char* spec : {"n=normal:", "n=normal:4x-1", "n=unit:q"}) {
    const Result bad = cli({"run", m, "-i", spec});
    expect_one_error_line(bad, 2);
    EXPECT_THAT(bad.err, HasSubstr(spec));
  }
}

TEST_F(Cli, OutputDirWritesNpyAndPb) {
  const fs::path out = dir_ / "new" / "folder";
  const Result r = cli({"run", model_.string(), "-i", "x=" + x_npy_.string(), "-i", "axis=const:1",
                        "--output-dir", out.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("y.npy"));
  EXPECT_EQ(names_in(out), std::vector<std::string>{"y.npy"});
  const Tensor y = read_npy(out / "y.npy");
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<double>(y), y_);

  const Result pb = cli({"run", model_.string(), "-i", "x=" + x_npy_.string(), "-i", "axis=const:1",
                         "-o", out.string(), "--output-format", "pb"});
  ASSERT_EQ(pb.status, 0) << pb.err;
  EXPECT_EQ(names_in(out), (std::vector<std::string>{"y.npy", "y.pb"}));
  std::string name;
  const Tensor ypb = read_pb(out / "y.pb", &name);
  EXPECT_EQ(name, "y");
  EXPECT_EQ(ypb.shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<double>(ypb), y_);
}

TEST_F(Cli, BFloat16OutputsAreAlwaysPb) {
  ModelBuilder b(13);
  b.input("x", kBFloat16).output("s", kBFloat16);
  b.node("Sum", {"x", "x"}, {"s"});
  b.write(dir_ / "bf16.onnx");
  const fs::path out = dir_ / "out";
  const Result r = cli({"run", (dir_ / "bf16.onnx").string(), "-i", "x=random:4x2", "-o",
                        out.string(), "--output-format", "npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(names_in(out), std::vector<std::string>{"s.pb"});
  std::string name;
  const Tensor s = read_pb(out / "s.pb", &name);
  EXPECT_EQ(name, "s");
  EXPECT_EQ(s.dtype(), DType::kBFloat16);
  EXPECT_EQ(s.shape(), (Shape{4, 2}));
}

TEST_F(Cli, OutputNamesBecomeSafeFileNames) {
  ModelBuilder b(14);
  b.input("x", kDouble).output("out/y:1");
  b.node("Identity", {"x"}, {"out/y:1"});
  b.write(dir_ / "id.onnx");
  const fs::path out = dir_ / "out";
  const Result r =
      cli({"run", (dir_ / "id.onnx").string(), "-i", "x=" + x_npy_.string(), "-o", out.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(names_in(out), std::vector<std::string>{"out_y_1.npy"});
  EXPECT_EQ(values_of<double>(read_npy(out / "out_y_1.npy")),
            (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST_F(Cli, OutputDirBelowARegularFileFails) {
  const fs::path file = dir_ / "plain";
  write(file, "not a folder");
  const Result r = cli({"run", model_.string(), "-i", "x=" + x_npy_.string(), "-i", "axis=const:1",
                        "-o", (file / "sub").string()});
  expect_one_error_line(r);
  EXPECT_THAT(r.err, HasSubstr("plain"));
  EXPECT_EQ(read_all(file), "not a folder");
  EXPECT_EQ(names_in(dir_.path()), (std::vector<std::string>{"cumsum.onnx", "plain", "x.npy"}));
  // The regular file itself as the folder.
  const Result itself = cli({"run", model_.string(), "-i", "x=" + x_npy_.string(), "-i",
                             "axis=const:1", "-o", file.string()});
  expect_one_error_line(itself);
  EXPECT_EQ(read_all(file), "not a folder");
  EXPECT_EQ(names_in(dir_.path()), (std::vector<std::string>{"cumsum.onnx", "plain", "x.npy"}));
}

TEST_F(Cli, FailedRunWritesNothing) {
  const fs::path out = dir_ / "out";
  fs::create_directory(out);
  write(out / "y.npy", "previous contents");
  const Result r = cli({"run", model_.string(), "-i", "x=" + x_npy_.string(), "-i", "axis=const:2",
                        "-o", out.string()});
  expect_one_error_line(r);
  EXPECT_THAT(r.err,
              AllOf(HasSubstr("CumSum"), HasSubstr("axis 2 is out of range"), HasSubstr("rank 2")));
  EXPECT_EQ(read_all(out / "y.npy"), "previous contents");
  EXPECT_EQ(names_in(out), std::vector<std::string>{"y.npy"});
}

TEST_F(Cli, OutputBlockedByAFolderWritesNothing) {
  // Two outputs; a folder stands where the second is to go. That is seen before any file is
  // written, so the first output is not written either.
  ModelBuilder b(14);
  b.input("x", kDouble).input("axis", kInt64).output("a").output("b");
  b.node("CumSum", {"x", "axis"}, {"a"});
  b.node("Identity", {"x"}, {"b"});
  b.write(dir_ / "two.onnx");
  const fs::path out = dir_ / "out";
  fs::create_directories(out / "b.npy");
  const Result r = cli({"run", (dir_ / "two.onnx").string(), "-i", "x=" + x_npy_.string(), "-i",
                        "axis=const:1", "-o", out.string()});
  expect_one_error_line(r);
  EXPECT_EQ(r.err, fmt::format("error: cannot write '{}': a folder of that name is in the way\n",
                               (out / "b.npy").string()));
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(names_in(out), std::vector<std::string>{"b.npy"});
  EXPECT_TRUE(fs::is_empty(out / "b.npy"));
}

// Two outputs, the second of them 800 KB, under a file size limit of 64 KiB: the second write
// fails after 64 KiB are on disk. The first output is written whole, the second's previous file
// stays as it was, and no partial or temporary file is left.
TEST_F(Cli, WriteFailingMidwayKeepsThePreviousFile) {
  ModelBuilder b(14);
  b.input("s", kDouble).input("x", kDouble).output("a").output("b");
  b.node("Identity", {"s"}, {"a"});
  b.node("Identity", {"x"}, {"b"});
  b.write(dir_ / "two.onnx");
  const fs::path out = dir_ / "out";
  fs::create_directory(out);
  write(out / "a.npy", "previous a");
  write(out / "b.npy", "previous b");
  const Result r = finish(start({"run", (dir_ / "two.onnx").string(), "-i", "s=" + x_npy_.string(),
                                 "-i", "x=random:100000", "-o", out.string()},
                                {.file_size = 64 << 10, .address_space = std::nullopt}));
  expect_one_error_line(r);
  EXPECT_EQ(r.err, fmt::format("error: cannot write '{}': write failed: File too large\n",
                               (out / "b.npy").string()));
  EXPECT_EQ(r.out, fmt::format("wrote {} (float64, shape (2, 3))\n", (out / "a.npy").string()));
  EXPECT_EQ(names_in(out), (std::vector<std::string>{"a.npy", "b.npy"}));
  EXPECT_EQ(values_of<double>(read_npy(out / "a.npy")), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  const std::string b_now = read_all(out / "b.npy");
  EXPECT_TRUE(b_now == "previous b") << "b.npy now holds " << b_now.size() << " bytes";
}

// The size of a regular file that process `pid` holds open in `dir`: the output it is writing,
// under whatever name (or none). Empty when it holds none.
std::optional<off_t> size_of_file_open_in(pid_t pid, const fs::path& dir) {
  const std::string prefix = dir.string() + "/";
  std::error_code ec;
  for (fs::directory_iterator it(fmt::format("/proc/{}/fd", pid), ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code link_ec;
    const std::string target = fs::read_symlink(it->path(), link_ec).string();
    struct stat info {};
    if (!link_ec && target.starts_with(prefix) && ::stat(it->path().c_str(), &info) == 0 &&
        S_ISREG(info.st_mode)) {
      return info.st_size;
    }
  }
  return std::nullopt;
}

// SIGKILL while a 128 MB output is being written. The kill is sent once the output is seen
// partly written; should it land later than that, after the rename, the same promise holds:
// the folder holds the previous file or the whole new one, and nothing else.
TEST_F(Cli, KillWhileWritingLeavesThePreviousFileOrTheWholeNewOne) {
  constexpr int64_t kCount = 16'000'000;
  constexpr auto kDataBytes = static_cast<off_t>(kCount * sizeof(double));
  const fs::path out = dir_ / "out";
  fs::create_directory(out);
  const fs::path folder = fs::canonical(out);
  const auto args = [&](const fs::path& to) {
    return std::vector<std::string>{
        "run", model_.string(), "-i", fmt::format("x=random:{}", kCount),
        "-i",  "axis=const:0",  "-o", to.string()};
  };
  std::string whole;  // the output of an uninterrupted run, made when first needed
  int killed_midway = 0;
  for (int attempt = 0; attempt < 5 && killed_midway == 0; ++attempt) {
    SCOPED_TRACE(fmt::format("attempt {}", attempt));
    write(out / "y.npy", "previous contents");
    const Child child = start(args(out));
    int raw = 0;
    bool killed = false;
    while (::waitpid(child.pid, &raw, WNOHANG) == 0) {
      const std::optional<off_t> size = size_of_file_open_in(child.pid, folder);
      if (size && *size > 0 && *size < kDataBytes) {
        ASSERT_EQ(::kill(child.pid, SIGKILL), 0);
        ASSERT_EQ(::waitpid(child.pid, &raw, 0), child.pid);
        killed = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    const Result r = result_of(child, raw);
    if (killed) {
      EXPECT_EQ(r.signal, SIGKILL);
    } else {
      EXPECT_EQ(r.status, 0) << r.err;
    }
    EXPECT_EQ(names_in(out), std::vector<std::string>{"y.npy"}) << "a temporary file is left";
    const std::string now = read_all(out / "y.npy");
    if (now == "previous contents") {
      killed_midway += killed ? 1 : 0;
      continue;
    }
    if (whole.empty()) {
      ASSERT_EQ(cli(args(dir_ / "whole")).status, 0);
      whole = read_all(dir_ / "whole" / "y.npy");
      ASSERT_EQ(whole.size(), static_cast<std::size_t>(kDataBytes) + 128);
    }
    EXPECT_TRUE(now == whole) << "y.npy is " << now.size() << " bytes, not the previous file "
                              << "nor the whole new one of " << whole.size();
  }
  EXPECT_EQ(killed_midway, 1) << "no kill landed while the output was being written";
}

TEST_F(Cli, TwoOutputsForOneFileWriteNothing) {
  ModelBuilder b(14);
  b.input("x", kDouble).output("a/b").output("a:b");
  b.node("Identity", {"x"}, {"a/b"});
  b.node("Identity", {"x"}, {"a:b"});
  b.write(dir_ / "clash.onnx");
  const fs::path out = dir_ / "out";
  fs::create_directory(out);
  write(out / "a_b.npy", "previous contents");
  const Result r = cli(
      {"run", (dir_ / "clash.onnx").string(), "-i", "x=" + x_npy_.string(), "-o", out.string()});
  expect_one_error_line(r);
  EXPECT_EQ(r.err, fmt::format("error: outputs 'a/b' and 'a:b' would both be written to '{}' "
                               "(file names keep only letters, digits, '.', '_' and '-')\n",
                               (out / "a_b.npy").string()));
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(read_all(out / "a_b.npy"), "previous contents");
  EXPECT_EQ(names_in(out), std::vector<std::string>{"a_b.npy"});
}

// ---- Bad input ----------------------------------------------------------------------------------

TEST_F(Cli, MemoryLimitRefusesLargeTensorsAndFiles) {
  const std::string m = model_.string();
  {
    const Result r =
        cli({"run", m, "-i", "x=random:1000x1000", "-i", "axis=const:1", "--memory-limit", "1MiB"});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, HasSubstr("a float64 tensor of shape [1000, 1000] needs 8000000 bytes "
                                 "(7.6 MiB), more than the memory limit of 1048576 bytes"));
  }
  {
    const Result r = cli(
        {"run", m, "-i", "x=" + x_npy_.string(), "-i", "axis=const:1", "--memory-limit", "120"});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, AllOf(HasSubstr("reading '" + x_npy_.string() + "' needs"),
                             HasSubstr("more than the memory limit of 120 bytes;")));
  }
  {
    const Result r = cli({"run", m, "-i", "x=random:1000x1000", "-i", "axis=const:1"},
                         "CUMULUS_MEMORY_LIMIT=1M");
    expect_one_error_line(r);
    EXPECT_THAT(r.err, HasSubstr("more than the memory limit of 1048576 bytes"));
  }
  {
    const Result r = cli({"run", m, "-i", "x=" + x_npy_.string(), "-i", "axis=const:1"},
                         "CUMULUS_MEMORY_LIMIT=lots");
    expect_one_error_line(r);
    EXPECT_THAT(r.err, HasSubstr("CUMULUS_MEMORY_LIMIT=\"lots\" is not a size"));
  }
  const Result ok =
      cli({"run", m, "-i", "x=" + x_npy_.string(), "-i", "axis=const:1", "--memory-limit", "1MiB"});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out, y_text_);
}

TEST_F(Cli, BadInputsExitOneWithOneErrorLine) {
  const std::string m = model_.string();
  const std::string x = "x=" + x_npy_.string();
  {
    const Result r = cli({"run", m, "-i", x, "-i", "axis=const:2"});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, AllOf(HasSubstr("CumSum"), HasSubstr("axis 2 is out of range"),
                             HasSubstr("rank 2")));
    EXPECT_EQ(r.out, "");
  }
  {
    const Result r = cli({"run", (dir_ / "missing.onnx").string(), "-i", x});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, HasSubstr("missing.onnx"));
  }
  {
    const Result r = cli({"run", m, "-i", x, "-i", "axis=const:1", "-i", "z=const:1"});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, AllOf(HasSubstr("unknown input 'z'"), HasSubstr("x, axis")));
  }
  {
    const Result r = cli({"run", m, "-i", x});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, HasSubstr("missing input 'axis'"));
  }
  {
    const Result r =
        cli({"run", m, "-i", "x=" + (dir_ / "nope.npy").string(), "-i", "axis=const:1"});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, HasSubstr("nope.npy"));
  }
  {
    write(dir_ / "ints.npy", onnx::serialize_npy(make<int32_t>({2}, {1, 2})));
    const Result r =
        cli({"run", m, "-i", "x=" + (dir_ / "ints.npy").string(), "-i", "axis=const:0"});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, HasSubstr("input 'x' is declared float64 but was given int32"));
  }
  {
    ModelBuilder b(14);
    b.input("x", kDouble, std::vector<Dim>{2, 3}).input("axis", kInt64).output("y");
    b.node("CumSum", {"x", "axis"}, {"y"});
    b.write(dir_ / "static.onnx");
    const Result r =
        cli({"run", (dir_ / "static.onnx").string(), "-i", "x=random:3x3", "-i", "axis=const:0"});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, HasSubstr("input 'x' has shape [3, 3] but the model declares [2, 3]"));
  }
  {
    write(dir_ / "garbage.onnx", "\xff\xff\xff\xff garbage");
    const Result r = cli({"run", (dir_ / "garbage.onnx").string()});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, AllOf(HasSubstr("garbage.onnx"), HasSubstr("not a valid ONNX model")));
  }
  {
    ModelBuilder b(13);
    b.input("x", kFloat16).input("axis", kInt64).output("y");
    b.node("CumSum", {"x", "axis"}, {"y"});
    b.write(dir_ / "half13.onnx");
    const Result r = cli({"run", (dir_ / "half13.onnx").string()});
    expect_one_error_line(r);
    EXPECT_THAT(r.err, AllOf(HasSubstr("CumSum-11"), HasSubstr("float16")));
  }
}

TEST_F(Cli, GeneratedValuesNeedATypeCumulusRuns) {
  ModelBuilder untyped(14);
  untyped.input("x", 0).output("y");
  untyped.node("Identity", {"x"}, {"y"});
  untyped.write(dir_ / "untyped.onnx");
  ModelBuilder int8(14);
  int8.input("x", kInt8).output("y");
  int8.node("Identity", {"x"}, {"y"});
  int8.write(dir_ / "int8.onnx");
  for (const std::string spec : {"x=random:2x3", "x=const:1"}) {
    SCOPED_TRACE(spec);
    const Result none = cli({"run", (dir_ / "untyped.onnx").string(), "-i", spec});
    expect_one_error_line(none);
    EXPECT_EQ(none.err, "error: input 'x' declares no type, so '" + spec +
                            "' cannot make a value for it; give a .npy or .pb file\n");
    const Result other = cli({"run", (dir_ / "int8.onnx").string(), "-i", spec});
    expect_one_error_line(other);
    EXPECT_EQ(other.err, "error: input 'x' has type int8, which cumulus does not run, so '" + spec +
                             "' cannot make a value for it\n");
  }
  // As the message says, a file does it.
  const Result file = cli({"run", (dir_ / "untyped.onnx").string(), "-i", "x=" + x_npy_.string()});
  EXPECT_EQ(file.status, 0) << file.err;
  EXPECT_THAT(file.out, StartsWith("y: shape=(2, 3), dtype=float64\n"));
}

// protobuf parses at most 2 GiB. A larger model or .pb file is refused by its size before it is
// read: with the memory limit below its size, reading it first would report the limit instead.
TEST_F(Cli, ProtobufFilesOverTwoGiBAreRefusedBeforeTheyAreRead) {
  const auto sparse = [&](const std::string& name) {
    const fs::path path = dir_ / name;
    write(path, "");
    fs::resize_file(path, (std::uintmax_t{1} << 31) + 1);  // a hole: no disk, no memory
    return path;
  };
  const fs::path model = sparse("big.onnx");
  const Result r = cli({"run", model.string(), "--memory-limit", "1GiB"});
  expect_one_error_line(r);
  EXPECT_EQ(r.err, fmt::format("error: model '{}': 2147483649 bytes is more than protobuf can "
                               "parse (2 GiB)\n",
                               model.string()));
  const fs::path tensor = sparse("big.pb");
  const Result t = cli({"run", model_.string(), "-i", "x=" + tensor.string(), "-i", "axis=const:0",
                        "--memory-limit", "1GiB"});
  expect_one_error_line(t);
  EXPECT_EQ(t.err, fmt::format("error: tensor file '{}': 2147483649 bytes is more than protobuf "
                               "can parse (2 GiB)\n",
                               tensor.string()));
}

// Allocations that fail end in one line that names what was being allocated, and exit 1.
TEST_F(Cli, AllocationFailuresAreOneErrorLine) {
  // AddressSanitizer's allocator must fail as the system's does, not abort, and keep its warning
  // about it out of stderr.
  const std::string asan_returns_null =
      "ASAN_OPTIONS=allocator_may_return_null=1:log_path=" + (dir_ / "asan").string();
  // 128 TiB is more address space than a process has, so with the memory limit above it the
  // allocation itself fails, wherever it is: for an input, or for a node's output.
  const std::string limit = "--memory-limit=1024TiB";
  const Result input =
      cli({"run", model_.string(), "-i", "x=random:17592186044416", "-i", "axis=const:0", limit},
          asan_returns_null);
  expect_one_error_line(input);
  EXPECT_EQ(input.err,
            "error: input 'x': cannot allocate 140737488355328 bytes for a float64 tensor of "
            "shape [17592186044416]\n");

  ModelBuilder b(13);
  b.input("a", kFloat, std::vector<Dim>{32768, 1, 1});
  b.input("b", kFloat, std::vector<Dim>{1, 32768, 1});
  b.input("c", kFloat, std::vector<Dim>{1, 1, 32768});
  b.node("Sum", {"a", "b", "c"}, {"y"});
  b.output("y", kFloat);
  b.write(dir_ / "broadcast.onnx");
  const Result node = cli({"run", (dir_ / "broadcast.onnx").string(), "-i", "a=random:32768x1x1",
                           "-i", "b=random:1x32768x1", "-i", "c=random:1x1x32768", limit},
                          asan_returns_null);
  expect_one_error_line(node);
  EXPECT_EQ(node.err,
            "error: cannot allocate 140737488355328 bytes for a float32 tensor of shape [32768, "
            "32768, 32768] (node #0 (Sum): data_0='a', data_1='b', data_2='c')\n");
}

// The same under a real shortage: an address space limit of 1.5 GiB, where the input of 560 MB
// and the output of as much fit, but not the file made of the output. The memory limit is set
// high so that the machine's memory does not decide.
TEST_F(Cli, RunningOutOfMemoryIsOneErrorLine) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space, more than the limit";
#endif
  constexpr rlim_t kLimit = rlim_t{1536} << 20;
  const Result input = finish(start({"run", model_.string(), "-i", "x=random:200000000", "-i",
                                     "axis=const:0", "--threads", "1", "--memory-limit", "1TiB"},
                                    {.file_size = std::nullopt, .address_space = kLimit}));
  expect_one_error_line(input);
  EXPECT_EQ(input.err,
            "error: input 'x': cannot allocate 1600000000 bytes for a float64 tensor of shape "
            "[200000000]\n");

  const fs::path out = dir_ / "out";
  fs::create_directory(out);
  write(out / "y.npy", "previous contents");
  const Result file =
      finish(start({"run", model_.string(), "-i", "x=random:70000000", "-i", "axis=const:0",
                    "--threads", "1", "--memory-limit", "1TiB", "-o", out.string()},
                   {.file_size = std::nullopt, .address_space = kLimit}));
  expect_one_error_line(file);
  EXPECT_EQ(file.err, "error: not enough memory to serialise output 'y' (560000000 bytes)\n");
  EXPECT_EQ(read_all(out / "y.npy"), "previous contents");
  EXPECT_EQ(names_in(out), std::vector<std::string>{"y.npy"});
}

// ---- test ---------------------------------------------------------------------------------------

// An ONNX backend test folder: model.onnx and test_data_set_0 with the inputs and `expected`.
void make_case(const fs::path& dir, const Tensor& x, const Tensor& expected) {
  fs::create_directories(dir / "test_data_set_0");
  cumsum_model().write(dir / "model.onnx");
  write(dir / "test_data_set_0" / "input_0.pb", onnx::serialize_tensor_proto(x, "x"));
  write(dir / "test_data_set_0" / "input_1.pb",
        onnx::serialize_tensor_proto(Tensor::scalar<int64_t>(1), "axis"));
  write(dir / "test_data_set_0" / "output_0.pb", onnx::serialize_tensor_proto(expected, "y"));
}

TEST_F(Cli, TestCommandPassesAndFails) {
  const fs::path good = dir_ / "cases" / "test_good";
  make_case(good, x_, make<double>({2, 3}, y_));
  const Result pass = cli({"test", good.string()});
  EXPECT_EQ(pass.status, 0) << pass.out << pass.err;
  auto lines = lines_of(pass.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(pass.out, HasSubstr("PASS test_good"));
  EXPECT_EQ(lines.back(), "1 passed, 0 failed");

  const fs::path bad = dir_ / "cases" / "test_bad";
  make_case(bad, x_, make<double>({2, 3}, {1, 3, 6, 4, 9, 16}));
  const Result fail = cli({"test", bad.string()});
  EXPECT_EQ(fail.status, 1);
  lines = lines_of(fail.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(fail.out, AllOf(HasSubstr("FAIL test_bad"), HasSubstr("'y'")));
  EXPECT_EQ(lines.back(), "0 passed, 1 failed");

  // A folder of cases runs them all.
  const Result both = cli({"test", (dir_ / "cases").string()});
  EXPECT_EQ(both.status, 1);
  lines = lines_of(both.out);
  ASSERT_EQ(lines.size(), 3u) << both.out;
  EXPECT_THAT(lines[0], StartsWith("FAIL test_bad"));
  EXPECT_THAT(lines[1], StartsWith("PASS test_good"));
  EXPECT_EQ(lines[2], "1 passed, 1 failed");

  // A case whose model does not load fails like any other; the run goes on.
  fs::create_directories(dir_ / "cases" / "test_broken" / "test_data_set_0");
  write(dir_ / "cases" / "test_broken" / "model.onnx", "\xff\xff garbage");
  const Result broken = cli({"test", (dir_ / "cases").string()});
  EXPECT_EQ(broken.status, 1);
  lines = lines_of(broken.out);
  ASSERT_EQ(lines.size(), 4u) << broken.out;
  EXPECT_THAT(lines[1], AllOf(StartsWith("FAIL test_broken"), HasSubstr("not a valid ONNX model")));
  EXPECT_EQ(lines[3], "1 passed, 2 failed");

  const Result missing = cli({"test", (dir_ / "nowhere").string()});
  expect_one_error_line(missing);
  EXPECT_THAT(missing.err, HasSubstr("nowhere"));
}

TEST_F(Cli, TestCommandNeedsFoldersWithModels) {
  fs::create_directories(dir_ / "empty" / "sub");
  write(dir_ / "empty" / "sub" / "notes.txt", "no model here");
  const Result none = cli({"test", (dir_ / "empty").string()});
  expect_one_error_line(none);
  EXPECT_EQ(none.err, fmt::format("error: '{}' holds no model.onnx, nor folders that do\n",
                                  (dir_ / "empty").string()));
  EXPECT_EQ(none.out, "");

  const Result missing = cli({"test", (dir_ / "nowhere").string()});
  expect_one_error_line(missing);
  EXPECT_EQ(missing.err, fmt::format("error: '{}' does not exist\n", (dir_ / "nowhere").string()));

  const Result file = cli({"test", x_npy_.string()});
  expect_one_error_line(file);
  EXPECT_EQ(file.err, fmt::format("error: '{}' is not a folder\n", x_npy_.string()));
}

TEST_F(Cli, TestCommandOnTheOnnxNodeTests) {
  const fs::path node_tests = fs::path(CUMULUS_SOURCE_DIR) / ".." / "shared" / "onnx-node-tests";
  if (!fs::is_directory(node_tests)) GTEST_SKIP() << node_tests << " does not exist";
  int cases = 0;
  for (const auto& e : fs::directory_iterator(node_tests)) {
    if (fs::exists(e.path() / "model.onnx")) ++cases;
  }
  const Result r = cli({"test", node_tests.string()});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), fmt::format("{} passed, 0 failed", cases));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("FAIL")));
}

// ---- perf ---------------------------------------------------------------------------------------

// A strict reader for one flat JSON object of strings, numbers, booleans and null. Numbers come
// back as their text; false on anything that is not JSON.
bool parse_flat_json(const std::string& text, std::map<std::string, std::string>& fields) {
  std::size_t i = 0;
  auto ws = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto string = [&](std::string& s) {
    if (i >= text.size() || text[i] != '"') return false;
    for (++i; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '"') {
        ++i;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (++i >= text.size() || std::strchr("\"\\/bfnrtu", text[i]) == nullptr) return false;
        if (text[i] == 'u') {
          for (int k = 0; k < 4; ++k) {
            if (++i >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[i]))) {
              return false;
            }
          }
        }
      }
      s += c;
    }
    return false;
  };
  auto value = [&](std::string& v) {
    if (i < text.size() && text[i] == '"') return string(v);
    for (const char* word : {"true", "false", "null"}) {
      if (text.compare(i, std::strlen(word), word) == 0) {
        v = word;
        i += std::strlen(word);
        return true;
      }
    }
    const std::size_t start = i;
    while (i < text.size() && std::strchr("+-0123456789.eE", text[i]) != nullptr) ++i;
    v = text.substr(start, i - start);
    if (v.empty()) return false;
    char* end = nullptr;
    std::strtod(v.c_str(), &end);
    return end == v.c_str() + v.size();
  };
  ws();
  if (i >= text.size() || text[i++] != '{') return false;
  ws();
  if (i < text.size() && text[i] == '}') {
    ++i;
  } else {
    for (;;) {
      std::string key, v;
      ws();
      if (!string(key)) return false;
      ws();
      if (i >= text.size() || text[i++] != ':') return false;
      ws();
      if (!value(v)) return false;
      fields[key] = v;
      ws();
      if (i < text.size() && text[i] == ',') {
        ++i;
        continue;
      }
      if (i < text.size() && text[i] == '}') {
        ++i;
        break;
      }
      return false;
    }
  }
  ws();
  return i == text.size();
}

double number(const std::map<std::string, std::string>& fields, const std::string& key) {
  const auto it = fields.find(key);
  if (it == fields.end()) {
    ADD_FAILURE() << "no key " << key;
    return 0;
  }
  return std::strtod(it->second.c_str(), nullptr);
}

TEST_F(Cli, PerfJson) {
  const Result r = cli({"perf", model_.string(), "--input", "x=random:1000", "--input",
                        "axis=const:0", "--iterations", "3", "--warmup", "1", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::map<std::string, std::string> fields;
  ASSERT_TRUE(parse_flat_json(r.out, fields)) << r.out;
  for (const char* key : {"median_ms", "min_ms", "max_ms", "iterations", "threads"}) {
    EXPECT_TRUE(fields.contains(key)) << key << " missing from " << r.out;
  }
  EXPECT_EQ(number(fields, "iterations"), 3);
  EXPECT_GE(number(fields, "threads"), 1);
  const double lo = number(fields, "min_ms"), mid = number(fields, "median_ms"),
               hi = number(fields, "max_ms");
  EXPECT_GE(lo, 0);
  EXPECT_LE(lo, mid);
  EXPECT_LE(mid, hi);

  const Result threads = cli({"perf", model_.string(), "-i", "x=random:1000", "-i", "axis=const:0",
                              "-n", "2", "--warmup", "1", "--json", "--threads", "2"});
  fields.clear();
  ASSERT_TRUE(parse_flat_json(threads.out, fields)) << threads.out;
  EXPECT_EQ(number(fields, "threads"), 2);
  EXPECT_EQ(number(fields, "iterations"), 2);
}

TEST_F(Cli, PerfHumanReadable) {
  const Result r = cli({"perf", model_.string(), "-i", "x=random:1000", "-i", "axis=const:0",
                        "--iterations", "3", "--warmup", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("median"), HasSubstr("min"), HasSubstr("max"),
                           HasSubstr("GB/s"), HasSubstr("3 iterations")));
  const Result bad = cli({"perf", model_.string(), "-i", "x=random:1000", "-i", "axis=const:1"});
  expect_one_error_line(bad);
  EXPECT_THAT(bad.err, HasSubstr("axis 1 is out of range"));
}

TEST_F(Cli, PerfJsonEscapesTheModelName) {
  // The JSON stays JSON whatever the model's file is called.
  const fs::path odd = dir_ / "we\"ird\\name.onnx";
  cumsum_model().write(odd);
  const Result r = cli({"perf", odd.string(), "-i", "x=random:10", "-i", "axis=const:0", "-n", "1",
                        "--warmup", "1", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::map<std::string, std::string> fields;
  EXPECT_TRUE(parse_flat_json(r.out, fields)) << r.out;
}

// ---- Threads ------------------------------------------------------------------------------------

TEST_F(Cli, ThreadCountDoesNotChangeTheBytes) {
  ModelBuilder b(26);
  b.input("x", kFloat).input("r", kFloat).output("rows").output("cols").output("prod").output("s");
  b.initializer(scalar_proto<int64_t>("last", -1));
  b.initializer(scalar_proto<int64_t>("first", 0));
  b.node("CumSum", {"x", "last"}, {"rows"});
  b.node("CumSum", {"x", "first"}, {"cols"});
  auto& prod = b.node("CumProd", {"r", "last"}, {"prod"});
  set_int(prod, "reverse", 1);
  b.node("Sum", {"x", "r", "rows"}, {"s"});
  b.write(dir_ / "big.onnx");
  std::map<int, fs::path> outs;
  for (int threads : {1, 2}) {
    outs[threads] = dir_ / fmt::format("t{}", threads);
    const Result r =
        cli({"run", (dir_ / "big.onnx").string(), "-i", "x=random:97x4099", "-i", "r=random:1x4099",
             "--seed", "7", "--threads", std::to_string(threads), "-o", outs[threads].string()});
    ASSERT_EQ(r.status, 0) << r.err;
  }
  for (const char* name : {"rows.npy", "cols.npy", "prod.npy", "s.npy"}) {
    SCOPED_TRACE(name);
    const std::string one = read_all(outs[1] / name), two = read_all(outs[2] / name);
    EXPECT_GT(one.size(), 1000u);
    EXPECT_TRUE(one == two) << "outputs differ between --threads 1 and --threads 2";
  }
}

}  // namespace
}  // namespace cumulus
