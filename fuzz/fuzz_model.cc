// Fuzzes the ONNX front end: bytes -> Model::parse (load, check, plan). When a model loads and
// every graph input has a declared type and static dimensions of at most kMaxInputElements
// elements (or an initializer to fall back on), it also runs, twice, on deterministic inputs of
// those types. cumulus::Error is an
// expected outcome of both steps; anything else (another exception, a crash, a sanitizer report)
// is a finding, as are outputs of the wrong number or type, or two runs that differ.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cumulus/error.h"
#include "cumulus/onnx.h"
#include "fuzz_util.h"

namespace {

using cumulus::DType;
using cumulus::Tensor;

constexpr int64_t kMaxInputElements = 4096;
// Outputs up to this size are compared between the two runs.
constexpr std::size_t kCompareBytes = std::size_t{1} << 20;

// FNV-1a of the model's bytes: the feeds differ from model to model but not from run to run.
uint64_t hash_of(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3ULL;
  return h;
}

// Small values that keep sums and products meaningful, now and then a special one. Integers
// in [-3, 3] also make plausible (and implausible) axes.
Tensor make_feed(DType dtype, const cumulus::Shape& shape, std::mt19937_64& random) {
  Tensor t(dtype, shape);
  cumulus::visit_dtype(dtype, [&]<class T>(T) {
    T* out = t.data<T>();
    for (int64_t i = 0; i < t.size(); ++i) {
      const uint64_t r = random();
      const auto small = static_cast<int64_t>(r % 7) - 3;
      if constexpr (std::is_integral_v<T>) {
        out[i] = static_cast<T>(small);  // modular for the unsigned types
      } else {
        double v = static_cast<double>(small);
        if ((r >> 8) % 16 == 0) {
          constexpr double kSpecials[] = {0.5,
                                          -0.0,
                                          1e30,
                                          -1e-30,
                                          65504.0,
                                          1e300,
                                          std::numeric_limits<double>::infinity(),
                                          std::numeric_limits<double>::quiet_NaN()};
          v = kSpecials[(r >> 12) % std::size(kSpecials)];
        }
        out[i] = cumulus::from_double<T>(v);
      }
    }
  });
  return t;
}

// The shape to feed `input` with, or nullopt when it is not small, static and typed.
std::optional<cumulus::Shape> feedable_shape(const cumulus::onnx::ValueInfo& input) {
  if (!input.dtype || !input.has_shape) return std::nullopt;
  cumulus::Shape shape;
  int64_t count = 1;
  for (const std::optional<int64_t>& d : input.dims) {
    if (!d || *d > kMaxInputElements) return std::nullopt;
    shape.push_back(*d);
    count *= *d;
    if (count > kMaxInputElements) return std::nullopt;
  }
  return shape;
}

// The inputs to run with, or nullopt when some input can be neither fed nor left to its
// initializer. An input with an initializer is left to it when it cannot be fed, and now and then
// (by the seed) when it can.
std::optional<std::vector<std::pair<std::string, Tensor>>> make_feeds(
    const cumulus::onnx::Model& model, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const cumulus::onnx::ValueInfo& input : model.inputs()) {
    const std::optional<cumulus::Shape> shape = feedable_shape(input);
    if (!shape && !input.has_default) return std::nullopt;
    if (!shape || (input.has_default && random() % 4 == 0)) continue;
    feeds.emplace_back(input.name, make_feed(*input.dtype, *shape, random));
  }
  return feeds;
}

// CUMULUS_FUZZ_VERBOSE=1 prints what happened to each input.
template <class... Args>
void note(fmt::format_string<Args...> format, Args&&... args) {
  static const bool on = std::getenv("CUMULUS_FUZZ_VERBOSE") != nullptr;
  if (on) fmt::print(stderr, "{}\n", fmt::format(format, std::forward<Args>(args)...));
}

void check_outputs(const cumulus::onnx::Model& model, const std::vector<Tensor>& outputs) {
  if (outputs.size() != model.outputs().size()) {
    fuzz::finding("run returned {} outputs for a model that declares {}", outputs.size(),
                  model.outputs().size());
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const cumulus::onnx::ValueInfo& info = model.outputs()[i];
    if (info.dtype && *info.dtype != outputs[i].dtype()) {
      fuzz::finding("output '{}' is {} but the model says {}", info.name,
                    cumulus::dtype_name(outputs[i].dtype()), cumulus::dtype_name(*info.dtype));
    }
  }
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): libFuzzer fixes the name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::limit_memory();
  std::optional<cumulus::onnx::Model> model;
  try {
    model.emplace(cumulus::onnx::Model::parse(fuzz::as_bytes(data, size)));
  } catch (const cumulus::Error& e) {
    note("load: {}", e.what());
    return 0;  // refusing a bad model is the expected outcome
  }
  const auto feeds = make_feeds(*model, hash_of(data, size));
  if (!feeds) {
    note("loaded; not run (an input is not small, static and typed)");
    return 0;
  }
  std::map<std::string, cumulus::ConstTensorView, std::less<>> views;
  for (const auto& [name, tensor] : *feeds) views.emplace(name, tensor.view());

  std::vector<Tensor> first;
  try {
    first = model->run(views);
  } catch (const cumulus::Error& e) {
    note("run: {}", e.what());
    return 0;  // axes out of range, shapes that do not broadcast, ...
  }
  note("ran: {} outputs", first.size());
  check_outputs(*model, first);

  // A second run sees the same constants and inputs: a run that wrote into an initializer, a
  // Constant or a feed would show here.
  std::size_t bytes = 0;
  for (const Tensor& t : first) bytes += t.nbytes();
  if (bytes > kCompareBytes) return 0;
  std::vector<Tensor> second;
  try {
    second = model->run(views);
  } catch (const cumulus::Error& e) {
    fuzz::finding("the second run of a model failed where the first succeeded: {}", e.what());
  }
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (!fuzz::identical(first[i], second[i])) {
      fuzz::finding(
          "output {} ('{}') differs between two runs of the same model on the same inputs", i,
          model->outputs()[i].name);
    }
  }
  // The feeds are read-only views: they must come back as they went in.
  const auto pristine = make_feeds(*model, hash_of(data, size));
  for (std::size_t i = 0; i < feeds->size(); ++i) {
    if (!fuzz::identical((*feeds)[i].second, (*pristine)[i].second)) {
      fuzz::finding("running the model wrote into input '{}'", (*feeds)[i].first);
    }
  }
  return 0;
}
