#include "commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <new>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "cumulus/onnx.h"
#include "format.h"
#include "random_input.h"
#include "scan_command.h"

namespace cumulus::cli {
namespace {

namespace fs = std::filesystem;
using onnx::Model;
using onnx::ValueInfo;

// The CLI's errors are cumulus::Errors too, so that one handler reports every failure alike.
template <class... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

constexpr int kExitBadInput = 1;
constexpr int kExitUsage = 2;

// A malformed command line: exit status 2, like CLI11's own parse errors.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An error message as one printable line: names from a model or a file may hold newlines or
// terminal escapes, and the CLI promises one line per error.
std::string one_line(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

struct Feeds {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, ConstTensorView, std::less<>> views() const {
    std::map<std::string, ConstTensorView, std::less<>> out;
    for (const auto& [name, t] : tensors) out.emplace(name, t.view());
    return out;
  }
};

DType declared_dtype(const ValueInfo& in, std::string_view spec) {
  if (in.dtype) return *in.dtype;
  if (in.onnx_type == 0) {
    fail(ErrorCode::kInvalidArgument,
         "input '{}' declares no type, so '{}' cannot make a value for it; give a .npy or "
         ".pb file",
         in.name, spec);
  }
  fail(ErrorCode::kInvalidArgument,
       "input '{}' has type {}, which cumulus does not run, so '{}' cannot make a value "
       "for it",
       in.name, onnx::onnx_type_name(in.onnx_type), spec);
}

Shape parse_dims(std::string_view text, std::string_view spec) {
  if (std::optional<Shape> shape = dims_from_text(text)) return *shape;
  throw UsageError(fmt::format(
      "--input {}: '{}' is not a list of dimensions like 4096x16384 (or 'scalar')", spec, text));
}

Tensor random_tensor(const std::string& input, DType dtype, Shape shape, RandomValues values,
                     std::string_view spec, std::mt19937_64& rng) {
  if (!random_values_fit(values, dtype)) {
    throw UsageError(fmt::format(
        "--input {}: input '{}' is {}, and normal: and unit: make floating values only; "
        "give random:DIMS",
        spec, input, dtype_name(dtype)));
  }
  // The tensor's own errors (the memory limit, an allocation failure) do not know the input.
  Tensor t = [&] {
    try {
      return Tensor(dtype, std::move(shape));
    } catch (const Error& e) {
      fail(e.code(), "input '{}': {}", input, e.what());
    }
  }();
  fill_random(t, rng, values);
  return t;
}

Tensor const_tensor(DType dtype, std::string_view text, std::string_view spec) {
  Tensor t(dtype, {});
  const auto bad = [&] {
    return UsageError(
        fmt::format("--input {}: '{}' is not a {} value", spec, text, dtype_name(dtype)));
  };
  visit_dtype(dtype, [&]<class T>(T) {
    if constexpr (std::is_integral_v<T>) {
      T v{};
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) throw bad();
      *t.data<T>() = v;
    } else {
      const std::string s(text);
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size()) throw bad();
      *t.data<T>() = from_double<T>(v);
    }
  });
  return t;
}

// NAME=SPEC, SPEC one of: a .npy/.pb file, random:DIMS, normal:DIMS, unit:DIMS, const:V.
Feeds make_feeds(const Model& model, const std::vector<std::string>& specs, uint64_t seed) {
  Feeds feeds;
  std::mt19937_64 rng(seed);
  std::set<std::string, std::less<>> seen;
  for (const auto& spec : specs) {
    const std::size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      throw UsageError(
          fmt::format("--input '{}' is not NAME=SPEC (SPEC: a .npy or .pb file, "
                      "random:DIMS, normal:DIMS, unit:DIMS or const:V)",
                      spec));
    }
    const std::string name = spec.substr(0, eq);
    const std::string_view value = std::string_view(spec).substr(eq + 1);
    if (!seen.insert(name).second)
      throw UsageError(fmt::format("--input '{}' is given twice", name));
    const ValueInfo& in = model.input(name);
    Tensor t;
    const std::size_t colon = value.find(':');
    const std::optional<RandomValues> kind = random_values_from_text(value.substr(0, colon));
    if (kind && colon != std::string_view::npos) {
      t = random_tensor(name, declared_dtype(in, spec), parse_dims(value.substr(colon + 1), spec),
                        *kind, spec, rng);
    } else if (value.starts_with("const:")) {
      t = const_tensor(declared_dtype(in, spec), value.substr(6), spec);
    } else {
      t = onnx::read_tensor_file(fs::path(value));
    }
    feeds.tensors.emplace_back(name, std::move(t));
  }
  return feeds;
}

// Output names may hold characters no file name can; keep letters, digits and ._- only.
std::string file_stem(const std::string& name) {
  std::string stem = name;
  for (char& c : stem) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  }
  if (stem.empty() || stem.find_first_not_of('.') == std::string::npos) stem = "_" + stem;
  return stem;
}

int run_command(const std::string& model_path, const std::vector<std::string>& inputs,
                const std::string& output_dir, const std::string& format, uint64_t seed) {
  const Model model = Model::load(model_path);
  const Feeds feeds = make_feeds(model, inputs, seed);
  const std::vector<Tensor> outputs = model.run(feeds.views());
  if (output_dir.empty()) {
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      std::cout << format_named(model.outputs()[i].name, outputs[i], 0);
    }
    return 0;
  }
  // Serialise everything before writing anything, so a bad output stops the run early.
  std::vector<std::pair<fs::path, std::string>> files;
  std::map<fs::path, std::string> taken;  // file -> the output written there
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = model.outputs()[i].name;
    const bool pb = format == "pb" || outputs[i].dtype() == DType::kBFloat16;
    fs::path path = fs::path(output_dir) / (file_stem(name) + (pb ? ".pb" : ".npy"));
    if (const auto [it, fresh] = taken.emplace(path, name); !fresh) {
      fail(ErrorCode::kInvalidArgument,
           "outputs '{}' and '{}' would both be written to '{}' (file names keep only "
           "letters, digits, '.', '_' and '-')",
           it->second, name, path.string());
    }
    try {
      files.emplace_back(std::move(path), pb ? onnx::serialize_tensor_proto(outputs[i], name)
                                             : onnx::serialize_npy(outputs[i]));
    } catch (const std::bad_alloc&) {
      fail(ErrorCode::kLimit, "not enough memory to serialise output '{}' ({} bytes)", name,
           outputs[i].nbytes());
    }
  }
  for (const auto& [path, bytes] : files) {
    if (fs::is_directory(path)) {
      fail(ErrorCode::kIo, "cannot write '{}': a folder of that name is in the way", path.string());
    }
  }
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) {
    fail(ErrorCode::kIo, "cannot create output folder '{}': {}", output_dir, ec.message());
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    onnx::write_file_atomic(files[i].first, files[i].second);
    std::cout << fmt::format("wrote {} ({}, shape {})\n", files[i].first.string(),
                             dtype_name(outputs[i].dtype()), onnx::shape_tuple(outputs[i].shape()));
  }
  return 0;
}

// ---- test ---------------------------------------------------------------------------------------

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

double as_double(ConstTensorView t, int64_t i) {
  return visit_dtype(t.dtype,
                     [&]<class T>(T) { return to_double(static_cast<const T*>(t.data)[i]); });
}

std::string index_string(std::span<const int64_t> shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_string(idx);
}

// Empty when they agree: floats as numpy.testing.assert_allclose(rtol=1e-3, atol=1e-7) does,
// with NaN equal to NaN; integers exactly.
std::string compare(const std::string& name, const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return fmt::format("output '{}' has type {}, expected {}", name, dtype_name(got.dtype()),
                       dtype_name(want.dtype()));
  }
  if (got.shape() != want.shape()) {
    return fmt::format("output '{}' has shape {}, expected {}", name, shape_string(got.shape()),
                       shape_string(want.shape()));
  }
  int64_t bad = 0, first = -1;
  const bool integral = !is_floating(got.dtype());
  visit_dtype(got.dtype(), [&]<class T>(T) {
    for (int64_t i = 0; i < got.size(); ++i) {
      bool ok;
      if constexpr (std::is_integral_v<T>) {
        ok = got.data<T>()[i] == want.data<T>()[i];
      } else {
        const double g = as_double(got, i), w = as_double(want, i);
        ok = (std::isnan(g) && std::isnan(w)) || g == w ||
             (std::isfinite(g) && std::isfinite(w) &&
              std::abs(g - w) <= kAtol + kRtol * std::abs(w));
      }
      if (!ok && bad++ == 0) first = i;
    }
  });
  if (bad == 0) return {};
  return fmt::format(
      "output '{}' differs at {} of {} elements; first at {}: got {}, expected {} ({})", name, bad,
      got.size(), index_string(got.shape(), first), as_double(got, first), as_double(want, first),
      integral ? "integers must match exactly" : "rtol 1e-3, atol 1e-7");
}

std::vector<fs::path> sorted_matching(const fs::path& dir, std::string_view prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().starts_with(prefix)) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Returns a failure message, or empty on success; `sets` counts the data sets run.
std::string run_case(const fs::path& dir, int& sets) {
  const Model model = Model::load(dir / "model.onnx");
  std::vector<const ValueInfo*> needed;
  for (const auto& in : model.inputs()) {
    if (!in.has_default) needed.push_back(&in);
  }
  const auto data_sets = sorted_matching(dir, "test_data_set_");
  if (data_sets.empty()) return "no test_data_set_* folder";
  for (const auto& set : data_sets) {
    std::map<std::string, Tensor> inputs;
    for (std::size_t i = 0;; ++i) {
      const fs::path file = set / fmt::format("input_{}.pb", i);
      if (!fs::exists(file)) break;
      if (i >= needed.size()) {
        return fmt::format("{}: {} has more inputs than the model's {}", set.filename().string(),
                           file.filename().string(), needed.size());
      }
      inputs.emplace(needed[i]->name, onnx::read_tensor_file(file));
    }
    std::map<std::string, ConstTensorView, std::less<>> feeds;
    for (const auto& [name, t] : inputs) feeds.emplace(name, t.view());
    const std::vector<Tensor> got = model.run(feeds);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const fs::path file = set / fmt::format("output_{}.pb", i);
      if (!fs::exists(file))
        return fmt::format("{}: missing {}", set.filename().string(), file.filename().string());
      const std::string diff =
          compare(model.outputs()[i].name, got[i], onnx::read_tensor_file(file));
      if (!diff.empty()) return fmt::format("{}: {}", set.filename().string(), diff);
    }
    ++sets;
  }
  return {};
}

int test_command(const std::vector<std::string>& dirs) {
  std::vector<fs::path> cases;
  for (const auto& d : dirs) {
    const fs::path dir(d);
    if (fs::exists(dir / "model.onnx")) {
      cases.push_back(dir);
    } else if (fs::is_directory(dir)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::directory_iterator(dir)) {
        if (fs::exists(e.path() / "model.onnx")) found.push_back(e.path());
      }
      if (found.empty()) {
        fail(ErrorCode::kInvalidArgument, "'{}' holds no model.onnx, nor folders that do", d);
      }
      std::sort(found.begin(), found.end());
      cases.insert(cases.end(), found.begin(), found.end());
    } else {
      fail(ErrorCode::kIo, "'{}' {}", d, fs::exists(dir) ? "is not a folder" : "does not exist");
    }
  }
  int passed = 0, failed = 0;
  for (const auto& dir : cases) {
    const std::string label =
        dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
    int sets = 0;
    std::string failure;
    try {
      failure = run_case(dir, sets);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (failure.empty()) {
      ++passed;
      std::cout << fmt::format("PASS {} ({} data set{})\n", label, sets, sets == 1 ? "" : "s");
    } else {
      ++failed;
      std::cout << fmt::format("FAIL {}: {}\n", one_line(label), one_line(failure));
    }
    std::cout.flush();
  }
  std::cout << fmt::format("{} passed, {} failed\n", passed, failed);
  return failed == 0 ? 0 : kExitBadInput;
}

// JSON string contents: quotes, backslashes and control characters escaped.
std::string json_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out;
}

// ---- perf ---------------------------------------------------------------------------------------

int perf_command(const std::string& model_path, const std::vector<std::string>& inputs,
                 int iterations, int warmup, bool json, uint64_t seed) {
  const Model model = Model::load(model_path);
  const Feeds feeds = make_feeds(model, inputs, seed);
  const auto views = feeds.views();
  std::size_t bytes = 0;
  for (const auto& [name, t] : feeds.tensors) bytes += t.nbytes();
  for (const Tensor& t : model.run(views)) bytes += t.nbytes();  // also checks the inputs once
  for (int i = 1; i < warmup; ++i) model.run(views);
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<Tensor> out = model.run(views);
    const auto stop = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  std::sort(ms.begin(), ms.end());
  const double median =
      ms.size() % 2 == 1 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  const double gbps = median > 0 ? static_cast<double>(bytes) / (median * 1e6) : 0.0;
  if (json) {
    std::cout << fmt::format(
        "{{\"model\": \"{}\", \"isa\": \"{}\", \"threads\": {}, \"iterations\": {}, \"warmup\": "
        "{}, \"min_ms\": "
        "{:.6f}, "
        "\"median_ms\": {:.6f}, \"max_ms\": {:.6f}, \"bytes\": {}, \"gb_per_s\": {:.4f}}}\n",
        json_escape(fs::path(model_path).filename().string()), kernel_isa(), num_threads(),
        iterations, warmup, ms.front(), median, ms.back(), bytes, gbps);
  } else {
    std::cout << fmt::format("{}: {} iterations after {} warmup, {} thread{}, {} kernels\n",
                             model_path, iterations, warmup, num_threads(),
                             num_threads() == 1 ? "" : "s", kernel_isa());
    std::cout << fmt::format("  median {:.3f} ms   min {:.3f} ms   max {:.3f} ms\n", median,
                             ms.front(), ms.back());
    std::cout << fmt::format("  {:.2f} GB/s ({:.1f} MB of input plus output per run)\n", gbps,
                             static_cast<double>(bytes) / 1e6);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cumulus: the ONNX accumulation operators (CumSum, CumProd, Sum), exact and fast."};
  app.set_version_flag("--version", "cumulus 0.1.0");
  app.require_subcommand(1);
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  uint64_t seed = 0;
  std::optional<uint64_t> memory_cap;
  auto add_common = [&](CLI::App* sub) {
    sub->add_option("--threads", threads, "Threads for the kernels (results do not depend on it)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    sub->add_option("--memory-limit", memory_cap,
                    "Largest tensor or file to accept, e.g. 512MiB or 4G (default: "
                    "CUMULUS_MEMORY_LIMIT, else the machine's memory)")
        ->transform(CLI::AsSizeValue(false));
  };
  auto add_seed = [&](CLI::App* sub) {
    sub->add_option("--seed", seed, "Seed for random:, normal: and unit: inputs")
        ->capture_default_str();
  };
  const char* kSpecHelp =
      "NAME=SPEC; SPEC is a .npy or .pb file, random:DIMS (e.g. random:4096x16384, "
      "random:scalar; uniform in [-1, 1), integers in [-100, 100]), normal:DIMS (standard "
      "normal) or unit:DIMS (uniform in [0, 1)), both for floating inputs, or const:V (a 0-D "
      "tensor of the input's type)";

  std::string model_path, output_dir, format = "npy";
  std::vector<std::string> inputs, dirs;
  auto* run = app.add_subcommand("run", "Run a model and print or save its outputs");
  run->add_option("model", model_path, "The .onnx model")->required();
  run->add_option("--input,-i", inputs, kSpecHelp);
  run->add_option("--output-dir,-o", output_dir,
                  "Write each output to DIR/<name>.npy (or .pb) instead of printing it");
  run->add_option("--output-format", format,
                  "File format of written outputs (bfloat16 is always .pb)")
      ->check(CLI::IsMember({"npy", "pb"}))
      ->capture_default_str();
  add_common(run);
  add_seed(run);

  auto* test =
      app.add_subcommand("test", "Run ONNX backend test folders (model.onnx + test_data_set_*)");
  test->add_option("dirs", dirs, "Test folders, or folders holding them")->required();
  add_common(test);

  int iterations = 20, warmup = 3;
  bool json = false;
  auto* perf =
      app.add_subcommand("perf", "Time a model's execution (no file I/O) over repeated runs");
  perf->add_option("model", model_path, "The .onnx model")->required();
  perf->add_option("--input,-i", inputs, kSpecHelp);
  perf->add_option("--iterations,-n", iterations, "Timed runs")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  perf->add_option("--warmup", warmup, "Untimed runs first")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  perf->add_flag("--json", json, "Print one JSON object");
  add_common(perf);
  add_seed(perf);

  ScanRequest scan_request;
  std::string scan_op = "cumsum", scan_memory = "256M";
  auto* scan = app.add_subcommand(
      "scan", "CumSum or CumProd of a .npy file of any size along an axis, in bounded memory");
  scan->add_option("input", scan_request.input, "The .npy file to scan (C or Fortran order)")
      ->required();
  scan->add_option("output", scan_request.output,
                   "The .npy file to write, in the input's order; written whole or not at all")
      ->required();
  scan->add_option("--op", scan_op, "The scan")
      ->check(CLI::IsMember({"cumsum", "cumprod"}))
      ->capture_default_str();
  scan->add_option("--axis", scan_request.axis,
                   "The axis to scan along, of the array as NumPy shows it; negative counts from "
                   "the end")
      ->required();
  scan->add_flag("--exclusive", scan_request.options.exclusive,
                 "Leave each element out of its own result");
  scan->add_flag("--reverse", scan_request.options.reverse, "Scan from the end of the axis");
  scan->add_option("--memory", scan_memory,
                   "Memory for the buffers and the scan state: bytes, or a number with K, M or "
                   "G (powers of 1024); peak use stays under it plus a small fixed overhead")
      ->capture_default_str();
  scan->add_option("--threads", threads, "Threads for the kernels (results do not depend on it)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  scan->add_flag_callback(
      "--no-sync", [&scan_request] { scan_request.sync = false; },
      "Do not wait for the output to reach the disk before naming it (as cp and dd do "
      "not): a killed run still leaves no output, a crash of the system may");
  scan->footer(
      "Example: the running sum of a 40 GB float32 array down its rows, in 1 GiB of memory:\n"
      "  cumulus scan big.npy sums.npy --op cumsum --axis 0 --memory 1G\n"
      "A progress bar goes to stderr when it is a terminal.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  try {
    // A bad CUMULUS_ISA stops every command here, not each test case of `test` on its own.
    kernel_isa();
    set_num_threads(threads);
    if (memory_cap) set_memory_limit(static_cast<std::size_t>(*memory_cap));
    if (*run) return run_command(model_path, inputs, output_dir, format, seed);
    if (*test) return test_command(dirs);
    if (*scan) {
      const std::optional<std::size_t> memory = parse_memory_size(scan_memory);
      if (!memory) {
        throw UsageError(fmt::format(
            "--memory '{}' is not a size (bytes, or a number with K, M, G or T, as in 256M)",
            scan_memory));
      }
      scan_request.op = scan_op == "cumsum" ? OpKind::kCumSum : OpKind::kCumProd;
      scan_request.memory = *memory;
      return scan_command(scan_request);
    }
    return perf_command(model_path, inputs, iterations, warmup, json, seed);
  } catch (const UsageError& e) {
    std::cerr << "error: " << one_line(e.what()) << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "error: " << one_line(e.what()) << "\n";
    return kExitBadInput;
  }
}

}  // namespace cumulus::cli
