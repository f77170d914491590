// `cumulus scan`: streamed scans of .npy files, held to the one-pass result bit for bit, to their
// memory bound, and to leaving no output behind when they fail or are killed.
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"
#include "cumulus/chunks.h"
#include "cumulus/onnx.h"
#include "cumulus/ops.h"
#include "kernels/kernels.h"
#include "model_builder.h"
#include "reference.h"

namespace cumulus {
namespace {

namespace fs = std::filesystem;
using cli_runner::cli;
using cli_runner::read_all;
using cli_runner::Result;
using model_builder::ModelBuilder;
using model_builder::TempDir;
using ::testing::HasSubstr;

// ---- Running the executable ---------------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  fs::path out, err;
};

// Starts `cumulus args...` without a shell, stdout and stderr to files. Under `file_size`
// (RLIMIT_FSIZE) SIGXFSZ is ignored, so a write past it fails with EFBIG.
Child start(const std::vector<std::string>& args, std::optional<rlim_t> file_size = {}) {
  static const TempDir capture;
  static int calls = 0;
  Child child{-1, capture / fmt::format("out{}", calls), capture / fmt::format("err{}", calls)};
  ++calls;
  std::vector<std::string> words = {CUMULUS_CLI};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  child.pid = ::fork();
  if (child.pid != 0) return child;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  const rlimit limit{file_size.value_or(0), file_size.value_or(0)};
  const int in = ::open("/dev/null", O_RDONLY);
  const int out = ::open(child.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = ::open(child.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if ((file_size && ::setrlimit(RLIMIT_FSIZE, &limit) != 0) ||
      ::sigaction(SIGXFSZ, &ignore, nullptr) != 0 || in < 0 || out < 0 || err < 0 ||
      ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) {
    ::_exit(126);
  }
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

struct Finished {
  Result result;
  long peak_kib = 0;  // the child's own peak resident set (ru_maxrss)
};

Finished finish(const Child& child) {
  int raw = 0;
  rusage usage{};
  if (::wait4(child.pid, &raw, 0, &usage) != child.pid) ADD_FAILURE() << "wait4: " << errno;
  Finished f;
  f.result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  f.result.signal = WIFSIGNALED(raw) ? WTERMSIG(raw) : 0;
  f.result.out = read_all(child.out);
  f.result.err = read_all(child.err);
  f.peak_kib = usage.ru_maxrss;
  return f;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// ---- Files --------------------------------------------------------------------------------------

// The header numpy.save writes, built here from numpy's rule (format.py _wrap_header): the dict,
// spaces for the growth axis (the first in C order, the last in Fortran order) to reach 21
// digits, then spaces and a newline to a multiple of 64 bytes. Version 1.0 only: small headers.
std::string numpy_header(DType dtype, const Shape& shape, bool fortran) {
  std::string tuple = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    tuple += fmt::format("{}{}", i == 0 ? "" : ", ", shape[i]);
  }
  tuple += shape.size() == 1 ? ",)" : ")";
  std::string dict = fmt::format("{{'descr': '<{}', 'fortran_order': {}, 'shape': {}, }}",
                                 dtype_info(dtype).npy_code, fortran ? "True" : "False", tuple);
  if (!shape.empty()) {
    dict.append(21 - std::to_string(fortran ? shape.back() : shape.front()).size(), ' ');
  }
  const std::size_t padding = 64 - (10 + dict.size() + 1) % 64;
  dict.append(padding, ' ');
  dict += '\n';
  std::string header = "\x93NUMPY";
  header += '\x01';
  header += '\0';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

std::string raw_bytes(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw()), t.nbytes());
}

// An array of `shape` as a .npy file in either order: `c_data` is its data in file order, the
// C-order array of `shape` (or, for Fortran order, of the reversed shape).
std::string npy_file(const Tensor& c_data, const Shape& shape, bool fortran) {
  return numpy_header(c_data.dtype(), shape, fortran) + raw_bytes(c_data);
}

void write(const fs::path& path, const std::string& bytes) {
  ModelBuilder::write_bytes(path, bytes);
}

// Values that make chunked sums easy to get wrong: magnitudes 2^-30 to 2^30, both signs, so
// partial sums cancel and round; integers over their whole range, so they wrap.
Tensor random_tensor(DType dtype, const Shape& shape, OpKind op, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor t(dtype, shape);
  visit_dtype(dtype, [&]<class T>(T) {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.size(); ++i) {
      if constexpr (std::is_integral_v<T>) {
        p[i] = static_cast<T>(rng());
      } else if (op == OpKind::kCumProd) {
        p[i] = from_double<T>(std::uniform_real_distribution<double>(0.5, 1.9)(rng));
      } else {
        const int exponent = static_cast<int>(rng() % 61) - 30;
        const double sign = rng() % 2 == 0 ? 1.0 : -1.0;
        const double mantissa = std::uniform_real_distribution<double>(1.0, 2.0)(rng);
        p[i] = from_double<T>(sign * std::ldexp(mantissa, exponent));
      }
    }
  });
  return t;
}

Shape reversed(Shape shape) {
  std::reverse(shape.begin(), shape.end());
  return shape;
}

// The bytes the scan budgets for a line of state: a carry.
constexpr uint64_t kStateLineBytes = sizeof(detail::Carry);
// And for each element of a chunk: the element as read, as scanned, and as the chunk before it
// waits to be written.
constexpr uint64_t kChunkCopies = 3;

// --memory values that force each way of cutting a [outer, length, inner] array (in file order)
// under --threads 1: 2 slabs a chunk, 2 rows a chunk, bands of 2 columns. A chunk's cost: its
// elements' copies, a state line for each of its lines and, when its lines are strided
// (inner > 1), scratch for a gathered group of them (scan_chunk_scratch_bytes).
std::vector<uint64_t> forcing_budgets(DType dtype, const Shape& c_shape, int64_t axis) {
  int64_t outer = 1, length = c_shape[static_cast<std::size_t>(axis)], inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(c_shape.size()); ++d) {
    if (d < axis) outer *= c_shape[static_cast<std::size_t>(d)];
    if (d > axis) inner *= c_shape[static_cast<std::size_t>(d)];
  }
  const uint64_t line = kStateLineBytes, element = kChunkCopies * dtype_size(dtype);
  const auto in = static_cast<uint64_t>(inner), len = static_cast<uint64_t>(length);
  const auto gather = [&](int64_t width) { return scan_chunk_scratch_bytes(dtype, 1, width); };
  std::vector<uint64_t> budgets = {2 * (len * in * element + in * line) + len * gather(inner),
                                   in * line + 2 * (in * element + gather(inner))};
  if (inner > 1) budgets.push_back(gather(inner) + 2 * (element + line) + gather(2));
  return budgets;
}

class CliScan : public ::testing::Test {
 protected:
  TempDir dir_;
};

// ---- Results ------------------------------------------------------------------------------------

// Floating CumProd's chunks keep the one-pass promise, each product within 1 ulp of the exact
// one, rather than the one-pass bits: each value then lies within 2 ulps of the one-pass value.
// Everything else, and every header, is the same bit for bit.
bool same_result(const std::string& got, const std::string& want, int64_t count, DType dtype,
                 OpKind op) {
  if (got == want) return true;
  if (op != OpKind::kCumProd || !is_floating(dtype) || got.size() != want.size()) {
    ADD_FAILURE() << "the output differs from the one-pass scan";
    return false;
  }
  const std::size_t data = got.size() - static_cast<std::size_t>(count) * dtype_size(dtype);
  if (got.compare(0, data, want, 0, data) != 0) {
    ADD_FAILURE() << "the output's header differs from the one-pass scan's";
    return false;
  }
  return visit_dtype(dtype, [&]<class T>(T) {
    if constexpr (!std::is_integral_v<T>) {
      for (int64_t i = 0; i < count; ++i) {
        T a, b;
        std::memcpy(&a, got.data() + data + i * sizeof(T), sizeof(T));
        std::memcpy(&b, want.data() + data + i * sizeof(T), sizeof(T));
        if (ref::ulp_distance(a, b) > 2) {
          ADD_FAILURE() << "element " << i << " is " << ref::ulp_distance(a, b)
                        << " ulps from the one-pass scan's";
          return false;
        }
      }
    }
    return true;
  });
}

// Every axis (and a negative one), order, exclusive and reverse of `op` over `dtype`, each under
// budgets that cut the array into slabs, rows and column bands: the file is the one-pass scan,
// bit for bit (floating CumProd: see same_result). Returns the runs made: 4 flag sets; 3 budgets
// an axis, 2 where the lines are contiguous (C order's last axis twice, Fortran order's first
// once): 84.
int expect_one_pass_results(const TempDir& dir, DType dtype, OpKind op) {
  const Shape shape = {3, 5, 4};
  int runs = 0;
  for (const bool fortran : {false, true}) {
    const Shape c_shape = fortran ? reversed(shape) : shape;
    const Tensor x = random_tensor(dtype, c_shape, op, 7 + runs);
    const fs::path in = dir / "in.npy";
    write(in, npy_file(x, shape, fortran));
    for (const int64_t axis : {0, 1, 2, -1}) {
      const int64_t a = axis < 0 ? axis + 3 : axis;
      const int64_t c_axis = fortran ? 2 - a : a;
      for (const int flags : {0, 1, 2, 3}) {
        const ScanOptions options{.exclusive = (flags & 1) != 0, .reverse = (flags & 2) != 0};
        const Tensor want =
            op == OpKind::kCumSum ? cumsum(x, c_axis, options) : cumprod(x, c_axis, options);
        const std::string want_file = npy_file(want, shape, fortran);
        for (const uint64_t memory : forcing_budgets(dtype, c_shape, c_axis)) {
          SCOPED_TRACE(
              fmt::format("{} {} {} order, axis {}, exclusive {}, reverse {}, "
                          "--memory {}",
                          op_name(op), dtype_name(dtype), fortran ? "F" : "C", axis,
                          options.exclusive, options.reverse, memory));
          const fs::path out = dir / "out.npy";
          std::vector<std::string> args = {"scan",
                                           in.string(),
                                           out.string(),
                                           "--op",
                                           op == OpKind::kCumSum ? "cumsum" : "cumprod",
                                           "--axis",
                                           std::to_string(axis),
                                           "--memory",
                                           std::to_string(memory),
                                           "--threads",
                                           "1"};
          if (options.exclusive) args.push_back("--exclusive");
          if (options.reverse) args.push_back("--reverse");
          const Result r = cli(args);
          if (r.status != 0) {
            ADD_FAILURE() << r.err;
            return runs;
          }
          EXPECT_EQ(r.err, "");
          EXPECT_EQ(r.out, fmt::format("wrote {} ({}, shape {})\n", out.string(), dtype_name(dtype),
                                       onnx::shape_tuple(shape)));
          const std::string got = read_all(out);
          if (!same_result(got, want_file, want.size(), dtype, op)) return runs;
          ++runs;
        }
      }
    }
  }
  return runs;
}

// Every .npy type and both ops.
TEST_F(CliScan, EqualsTheOnePassScanBitForBit) {
  int runs = 0;
  for (const DType dtype : kAllDTypes) {
    if (dtype_info(dtype).npy_code.empty()) continue;
    for (const OpKind op : {OpKind::kCumSum, OpKind::kCumProd}) {
      SCOPED_TRACE(fmt::format("{} {}", op_name(op), dtype_name(dtype)));
      runs += expect_one_pass_results(dir_, dtype, op);
    }
  }
  EXPECT_EQ(runs, 14 * 84);
}

// Ranks 1 and 5 and a long axis, in C and Fortran order, under a budget of a few rows.
TEST_F(CliScan, OtherRanksAndLongAxes) {
  const std::vector<Shape> shapes = {{1000}, {2, 1, 3, 2, 5}, {3, 999, 2}};
  for (const Shape& shape : shapes) {
    for (const bool fortran : {false, true}) {
      const Shape c_shape = fortran ? reversed(shape) : shape;
      const Tensor x = random_tensor(DType::kFloat32, c_shape, OpKind::kCumSum, 11);
      const fs::path in = dir_ / "in.npy";
      write(in, npy_file(x, shape, fortran));
      const auto rank = static_cast<int64_t>(shape.size());
      for (int64_t axis = 0; axis < rank; ++axis) {
        for (const bool reverse : {false, true}) {
          SCOPED_TRACE(fmt::format("shape {}, {} order, axis {}, reverse {}", shape_string(shape),
                                   fortran ? "F" : "C", axis, reverse));
          const int64_t c_axis = fortran ? rank - 1 - axis : axis;
          const Tensor want = cumsum(x, c_axis, {.reverse = reverse});
          const fs::path out = dir_ / "out.npy";
          std::vector<std::string> args = {"scan",   in.string(),          out.string(),
                                           "--axis", std::to_string(axis), "--memory",
                                           "3000"};
          if (reverse) args.push_back("--reverse");
          const Result r = cli(args);
          ASSERT_EQ(r.status, 0) << r.err;
          EXPECT_TRUE(read_all(out) == npy_file(want, shape, fortran));
        }
      }
    }
  }
}

// The helper above builds numpy's headers; this is one numpy 1.26 wrote (np.save of
// np.asfortranarray(np.zeros((5, 7, 3), np.float32))), so the helper is held to numpy itself.
TEST_F(CliScan, FortranOutputHasNumpysHeader) {
  const std::string numpy_wrote = std::string("\x93NUMPY\x01\x00v\x00", 10) +
                                  "{'descr': '<f4', 'fortran_order': True, 'shape': (5, 7, 3), }" +
                                  std::string(56, ' ') + "\n";
  EXPECT_EQ(numpy_header(DType::kFloat32, {5, 7, 3}, true), numpy_wrote);
  const Tensor x = Tensor::zeros(DType::kFloat32, {3, 7, 5});
  write(dir_ / "in.npy", npy_file(x, {5, 7, 3}, true));
  ASSERT_EQ(
      cli({"scan", (dir_ / "in.npy").string(), (dir_ / "out.npy").string(), "--axis", "1"}).status,
      0);
  EXPECT_EQ(read_all(dir_ / "out.npy").substr(0, 128), numpy_wrote);
}

// --no-sync only skips the wait for the disk: the same file, under the same name.
TEST_F(CliScan, NoSyncWritesTheSameFile) {
  const Shape shape = {300, 70};
  write(dir_ / "in.npy",
        npy_file(random_tensor(DType::kFloat32, shape, OpKind::kCumSum, 9), shape, false));
  const std::vector<std::string> args = {
      "scan", (dir_ / "in.npy").string(), "", "--axis", "0", "--memory", "64K"};
  std::vector<std::string> synced = args, unsynced = args;
  synced[2] = (dir_ / "synced.npy").string();
  unsynced[2] = (dir_ / "unsynced.npy").string();
  unsynced.push_back("--no-sync");
  ASSERT_EQ(cli(synced).status, 0);
  ASSERT_EQ(cli(unsynced).status, 0);
  EXPECT_EQ(read_all(dir_ / "unsynced.npy"), read_all(dir_ / "synced.npy"));
  EXPECT_EQ(names_in(dir_.path()),
            (std::vector<std::string>{"in.npy", "synced.npy", "unsynced.npy"}));
}

TEST_F(CliScan, EmptyArraysGiveEmptyArrays) {
  for (const Shape& shape : {Shape{0}, Shape{4, 0}, Shape{0, 3}}) {
    SCOPED_TRACE(shape_string(shape));
    const Tensor x(DType::kInt32, shape);
    write(dir_ / "in.npy", npy_file(x, shape, false));
    const Result r = cli({"scan", (dir_ / "in.npy").string(), (dir_ / "out.npy").string(), "--axis",
                          "0", "--memory", "4K"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(read_all(dir_ / "out.npy"), numpy_header(DType::kInt32, shape, false));
  }
}

// ---- Memory -------------------------------------------------------------------------------------

// A float32 .npy file of `shape` written a row at a time, with no array held in memory.
void write_big_file(const fs::path& path, const Shape& shape) {
  std::ofstream file(path, std::ios::binary);
  file << numpy_header(DType::kFloat32, shape, false);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> value(-1.0F, 1.0F);
  std::vector<float> row(static_cast<std::size_t>(shape.back()));
  for (int64_t r = 0; r < element_count(shape) / shape.back(); ++r) {
    for (float& v : row) v = value(rng);
    file.write(reinterpret_cast<const char*>(row.data()),
               static_cast<std::streamsize>(row.size() * sizeof(float)));
  }
  ASSERT_TRUE(file.good());
}

// A 40 MB file under --memory 4M, along each of its axes: the child's own peak resident set
// stays under the budget plus what a scan of a small file along an axis as long needs (eight
// lines of 4000, so the lines' state, which the budget counts, stays small there). That small run
// loads and touches much of what the big one does apart from the data (the kernels' code, the
// threads' stacks and heaps), so the bound follows the machine's fixed costs. The children run
// without transparent huge pages (PR_SET_THP_DISABLE, inherited through fork and exec): a kernel
// that keeps the executable's pages in 2 MiB folios (khugepaged collapses them as the tests run it
// again and again) maps a whole 2 MiB at the first touch of one of them, which is the page
// cache's rounding, not the scan's memory. Even so a run's peak moves from one run to the next,
// in steps of about 0.9 MiB, with the heap's peak fixed (3.68 MiB along axis 0): here a 4-element
// scan peaked at 7.2 to 9.3 MiB, the big file along axis 0 at 10.8 to 13.2 with other tests
// running beside it. So each figure is the least of three runs, and the slack is 2 MiB: a scan
// whose memory grew with the file (or a budget of 8M instead of 4M: 15.2 MiB along axis 1) would
// be over the bound in all three. A child's peak counts the pages of this process when it forks,
// so the big arrays live here only before and after the children run.
TEST_F(CliScan, PeakMemoryStaysUnderTheBudget) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer keeps freed blocks in quarantine and adds shadow memory: "
                  "resident memory is not the program's own";
#endif
  ASSERT_EQ(::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0), 0) << std::strerror(errno);
  struct HugePagesBack {
    ~HugePagesBack() { ::prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0); }
  } back;
  constexpr uint64_t kBudget = 4u << 20;
  const Shape shape = {2500, 4000};
  write_big_file(dir_ / "big.npy", shape);
  write_big_file(dir_ / "small0.npy", {4000, 8});
  write_big_file(dir_ / "small1.npy", {8, 4000});
  // The runs' own variation, and pages of the allocator that a small run does not touch.
  constexpr long kSlackKib = 2048;
  for (const int axis : {0, 1}) {
    // The least peak of three runs of the scan of `in` to `out`.
    const auto least_peak = [&](const std::string& in, const std::string& out) {
      long least = std::numeric_limits<long>::max();
      for (int round = 0; round < 3; ++round) {
        const Finished run = finish(start({"scan", (dir_ / in).string(), (dir_ / out).string(),
                                           "--axis", std::to_string(axis), "--memory", "4M"}));
        EXPECT_EQ(run.result.status, 0) << run.result.err;
        least = std::min(least, run.peak_kib);
      }
      return least;
    };
    const long base = least_peak(fmt::format("small{}.npy", axis), "small_out.npy");
    const long peak = least_peak("big.npy", fmt::format("out{}.npy", axis));
    const long bound_kib = static_cast<long>(kBudget / 1024) + base + kSlackKib;
    std::cout << "axis " << axis << ": peak " << peak << " KiB; small file's " << base
              << " KiB; bound " << bound_kib << " KiB\n";
    EXPECT_LE(peak, bound_kib) << "axis " << axis;
  }
  const Tensor x = onnx::read_tensor_file(dir_ / "big.npy");
  for (const int axis : {0, 1}) {
    EXPECT_TRUE(read_all(dir_ / fmt::format("out{}.npy", axis)) ==
                npy_file(cumsum(x, axis), shape, false))
        << "axis " << axis;
  }
}

// With stderr a terminal, a progress line (bytes done of the total, rate, time left) is drawn
// there and cleared at the end; elsewhere stderr stays empty (the tests above).
TEST_F(CliScan, ProgressOnATerminalOnly) {
  const Shape shape = {256, 4096};
  write_big_file(dir_ / "in.npy", shape);
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const std::string terminal = ::ptsname(master);
  std::vector<std::string> words = {
      CUMULUS_CLI, "scan", (dir_ / "in.npy").string(), (dir_ / "out.npy").string(), "--axis", "0",
      "--memory",  "64K"};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int slave = ::open(terminal.c_str(), O_RDWR | O_NOCTTY);
    const int null = ::open("/dev/null", O_RDWR);
    if (slave < 0 || null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 ||
        ::dup2(slave, 2) < 0) {
      ::_exit(126);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  std::string shown;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n <= 0) break;  // EIO once the child's end is closed
    shown.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(master);
  int raw = 0;
  ASSERT_EQ(::waitpid(pid, &raw, 0), pid);
  EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0);
  EXPECT_THAT(shown, HasSubstr("\rscan: "));
  EXPECT_THAT(shown, HasSubstr(" of 4.0 MiB ("));
  EXPECT_THAT(shown, HasSubstr("/s, "));
  EXPECT_THAT(shown, HasSubstr(" left"));
  EXPECT_THAT(shown, ::testing::EndsWith("\r\x1b[K"));
}

// ---- Failures leave nothing ---------------------------------------------------------------------

// The size of a regular file in `dir` that process `pid` holds open, under any name or none.
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

// SIGKILL once the output has started to be written: the output folder stays empty.
TEST_F(CliScan, KilledMidwayLeavesNoOutput) {
  const Shape shape = {2500, 4000};
  write(dir_ / "big.npy",
        npy_file(random_tensor(DType::kFloat32, shape, OpKind::kCumSum, 5), shape, false));
  const fs::path out = dir_ / "out";
  fs::create_directory(out);
  const fs::path folder = fs::canonical(out);
  for (const bool sync : {true, false}) {
    SCOPED_TRACE(sync ? "synced" : "--no-sync");
    int killed_midway = 0;
    for (int attempt = 0; attempt < 5 && killed_midway == 0; ++attempt) {
      std::vector<std::string> args = {
          "scan", (dir_ / "big.npy").string(), (out / "y.npy").string(), "--axis", "0", "--memory",
          "64K"};
      if (!sync) args.push_back("--no-sync");
      const Child child = start(args);
      int raw = 0;
      while (::waitpid(child.pid, &raw, WNOHANG) == 0) {
        const std::optional<off_t> size = size_of_file_open_in(child.pid, folder);
        if (size && *size > 0) {
          ASSERT_EQ(::kill(child.pid, SIGKILL), 0);
          ASSERT_EQ(::waitpid(child.pid, &raw, 0), child.pid);
          EXPECT_TRUE(WIFSIGNALED(raw));
          ++killed_midway;
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (killed_midway == 0) {
        fs::remove(out / "y.npy");  // it finished before the kill: try again
        continue;
      }
      EXPECT_EQ(names_in(out), std::vector<std::string>{}) << "a partial or temporary file is left";
    }
    EXPECT_EQ(killed_midway, 1) << "no kill landed while the output was being written";
  }
}

// A write failing after 64 KiB of a 4 MB output (a file size limit): one line naming the output,
// the previous file untouched, no temporary left.
TEST_F(CliScan, WriteErrorNamesTheOutputAndLeavesNothing) {
  const Shape shape = {1000, 1000};
  write(dir_ / "in.npy",
        npy_file(random_tensor(DType::kFloat32, shape, OpKind::kCumSum, 5), shape, false));
  const fs::path out = dir_ / "out";
  fs::create_directory(out);
  write(out / "y.npy", "previous");
  const Finished f = finish(start({"scan", (dir_ / "in.npy").string(), (out / "y.npy").string(),
                                   "--axis", "1", "--memory", "256K"},
                                  rlim_t{64} << 10));
  EXPECT_EQ(f.result.status, 1);
  EXPECT_EQ(f.result.err, fmt::format("error: cannot write '{}': write failed: File too large\n",
                                      (out / "y.npy").string()));
  EXPECT_EQ(f.result.out, "");
  EXPECT_EQ(names_in(out), std::vector<std::string>{"y.npy"});
  EXPECT_EQ(read_all(out / "y.npy"), "previous");
}

// ---- Errors -------------------------------------------------------------------------------------

class CliScanErrors : public CliScan {
 protected:
  void SetUp() override {
    write(in_, npy_file(random_tensor(DType::kFloat32, {5, 7, 3}, OpKind::kCumSum, 1), {5, 7, 3},
                        false));
  }

  // Runs scan IN OUT extra..., expects exit `status`, nothing on stdout, no OUT, and returns
  // stderr.
  std::string error_of(const std::vector<std::string>& extra, int status = 1,
                       const fs::path& in = {}) {
    std::vector<std::string> args = {"scan", (in.empty() ? in_ : in).string(), out_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = cli(args);
    EXPECT_EQ(r.status, status) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(fs::exists(out_));
    return r.err;
  }

  const fs::path in_ = dir_ / "in.npy";
  const fs::path out_ = dir_ / "out.npy";
};

TEST_F(CliScanErrors, UnreadableOrMalformedInput) {
  const fs::path missing = dir_ / "missing.npy";
  EXPECT_EQ(error_of({"--axis", "0"}, 1, missing),
            fmt::format("error: cannot read '{}': No such file or directory\n", missing.string()));
  const fs::path text = dir_ / "text.npy";
  write(text, "hello, world");
  EXPECT_EQ(error_of({"--axis", "0"}, 1, text),
            fmt::format("error: tensor file '{}': not a .npy file (it does not start with "
                        "\"\\x93NUMPY\")\n",
                        text.string()));
  const fs::path short_data = dir_ / "short.npy";
  write(short_data, numpy_header(DType::kFloat32, {2, 3}, false) + std::string(20, '\0'));
  EXPECT_EQ(error_of({"--axis", "0"}, 1, short_data),
            fmt::format("error: tensor file '{}': truncated: header shape (2, 3) of '<f4' needs "
                        "24 bytes of data, the file has 20\n",
                        short_data.string()));
  const fs::path header_cut = dir_ / "cut.npy";
  write(header_cut, numpy_header(DType::kFloat32, {2, 3}, false).substr(0, 40));
  EXPECT_EQ(error_of({"--axis", "0"}, 1, header_cut),
            fmt::format("error: tensor file '{}': truncated: the header of 118 bytes runs past "
                        "the end of the file (40 bytes)\n",
                        header_cut.string()));
  EXPECT_EQ(error_of({"--axis", "0"}, 1, dir_.path()),
            fmt::format("error: cannot read '{}': not a regular file\n", dir_.path().string()));
}

TEST_F(CliScanErrors, UnsupportedDtype) {
  std::string header = numpy_header(DType::kFloat32, {4}, false);
  header.replace(header.find("'<f4'"), 5, "'|b1'");
  write(dir_ / "bool.npy", header + std::string(4, '\1'));
  EXPECT_EQ(error_of({"--axis", "0"}, 1, dir_ / "bool.npy"),
            fmt::format("error: tensor file '{}': descr '|b1' is not supported (supported: "
                        "'<f2', '<f4', '<f8', '<i4', '<i8', '<u4', '<u8')\n",
                        (dir_ / "bool.npy").string()));
}

TEST_F(CliScanErrors, AxisOutOfRange) {
  for (const int axis : {3, -4}) {
    EXPECT_EQ(error_of({"--op", "cumprod", "--axis", std::to_string(axis)}),
              fmt::format("error: CumProd: axis {} is out of range for input '{}' of rank 3 "
                          "(shape [5, 7, 3]); valid: [-3, 2]\n",
                          axis, in_.string()));
  }
  write(dir_ / "scalar.npy", npy_file(Tensor::scalar(1.0), {}, false));
  EXPECT_EQ(error_of({"--axis", "0"}, 1, dir_ / "scalar.npy"),
            fmt::format("error: CumSum: input '{}' is a scalar (rank 0), which has no axis to "
                        "scan along\n",
                        (dir_ / "scalar.npy").string()));
}

TEST_F(CliScanErrors, MemoryMalformedOrTooSmall) {
  for (const std::string bad : {"12Q", "", "-5", "1.5G", "4MB"}) {
    EXPECT_EQ(error_of({"--axis", "0", "--memory", bad}, 2),
              fmt::format("error: --memory '{}' is not a size (bytes, or a number with K, M, G or "
                          "T, as in 256M)\n",
                          bad));
  }
  const uint64_t line = kStateLineBytes;
  const uint64_t least = line + kChunkCopies * 4;
  EXPECT_EQ(error_of({"--axis", "0", "--memory", std::to_string(least - 1)}),
            fmt::format("error: --memory {}: too small; CumSum of float32 needs at least {} bytes "
                        "(one line's scan state of {} bytes and one element read, one scanned "
                        "and one being written)\n",
                        least - 1, least, line));
  const Result r =
      cli({"scan", in_.string(), out_.string(), "--axis", "0", "--memory", std::to_string(least)});
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST_F(CliScanErrors, OutputThatIsTheInputIsRefused) {
  const std::string before = read_all(in_);
  fs::create_hard_link(in_, dir_ / "link.npy");
  fs::create_symlink(in_, dir_ / "sym.npy");
  for (const fs::path& same : {in_, dir_ / "link.npy", dir_ / "sym.npy", dir_ / "." / "in.npy"}) {
    const Result r = cli({"scan", in_.string(), same.string(), "--axis", "0"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err,
              fmt::format("error: output '{}' is the input file '{}'; a scan cannot write over "
                          "what it reads\n",
                          same.string(), in_.string()));
    EXPECT_EQ(read_all(in_), before);
  }
}

TEST_F(CliScanErrors, OutputFolderMissingOrInTheWay) {
  const fs::path nowhere = dir_ / "nowhere" / "out.npy";
  Result r = cli({"scan", in_.string(), nowhere.string(), "--axis", "0"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, fmt::format("error: cannot write '{}': cannot create a temporary file in "
                               "'{}': No such file or directory\n",
                               nowhere.string(), (dir_ / "nowhere").string()));
  fs::create_directory(out_);
  r = cli({"scan", in_.string(), out_.string(), "--axis", "0"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, fmt::format("error: cannot write '{}': a folder of that name is in the way\n",
                               out_.string()));
  EXPECT_TRUE(fs::is_empty(out_));
}

TEST_F(CliScan, HelpHasAnExample) {
  const Result r = cli({"scan", "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("cumulus scan big.npy sums.npy --op cumsum --axis 0 --memory 1G"));
  EXPECT_THAT(r.out, HasSubstr("--reverse"));
  EXPECT_THAT(r.out, HasSubstr("--exclusive"));
}

}  // namespace
}  // namespace cumulus
