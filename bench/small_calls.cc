// The time of one small call through the public API, on the calling thread with its data in
// cache: cumulus::cumsum, cumprod or a Sum of three equal inputs over rows of each length given
// (float32, or --dtype float64, float16, bfloat16). It uses nothing but include/cumulus, so the
// same source links with any build of the library, an older commit's included, and compares them
// with the timer's own code held fixed:
//
//   c++ -O2 -std=c++20 -I include bench/small_calls.cc build/libcumulus.a -lfmt -pthread -o t
//   taskset -c 1 ./t --op cumsum 17 100 1000 4000
//
// (also built as build/bench/small_calls). Terms are uniform in [-1, 1) (CumProd: [0.99, 1.01),
// so products stay near 1). Prints, per length, the median of --rounds rounds of --calls calls,
// with the fastest and slowest round, in ns a call. CUMULUS_ISA picks the kernels as for any
// program.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cumulus/ops.h"

namespace {

int usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--op cumsum|cumprod|sum] [--dtype float32|float64|float16|bfloat16]\n"
               "          [--rounds N] [--calls N] LENGTH...\n"
               "times one call over a row of each LENGTH, in ns (median of the rounds)\n",
               program);
  return 2;
}

bool positive(const char* text, long long& value) {
  char* end = nullptr;
  value = std::strtoll(text, &end, 10);
  return end != text && *end == '\0' && value > 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string op = "cumsum";
  cumulus::DType dtype = cumulus::DType::kFloat32;
  long long rounds = 5, calls = 200000;
  std::vector<int64_t> lengths;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    long long v = 0;
    if ((arg == "--op" || arg == "--dtype" || arg == "--rounds" || arg == "--calls") &&
        a + 1 < argc) {
      const char* value = argv[++a];
      if (arg == "--dtype") {
        const auto named = cumulus::dtype_from_name(value);
        if (!named || (*named != cumulus::DType::kFloat32 && *named != cumulus::DType::kFloat64 &&
                       *named != cumulus::DType::kFloat16 && *named != cumulus::DType::kBFloat16)) {
          return usage(argv[0]);
        }
        dtype = *named;
      } else if (arg == "--op") {
        op = value;
        if (op != "cumsum" && op != "cumprod" && op != "sum") return usage(argv[0]);
      } else if (!positive(value, v)) {
        std::fprintf(stderr, "%s: %s needs a positive integer, not '%s'\n", argv[0], arg.c_str(),
                     value);
        return 2;
      } else {
        (arg == "--rounds" ? rounds : calls) = v;
      }
    } else if (positive(arg.c_str(), v)) {
      lengths.push_back(v);
    } else {
      return usage(argv[0]);
    }
  }
  if (lengths.empty()) return usage(argv[0]);
  for (const int64_t n : lengths) {
    const std::size_t item = cumulus::dtype_size(dtype);
    std::vector<unsigned char> x(static_cast<std::size_t>(n) * item), y(x.size());
    std::mt19937 rng(1);
    const bool product = op == "cumprod";
    std::uniform_real_distribution<double> terms(product ? 0.99 : -1.0, product ? 1.01 : 1.0);
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
      const double v = terms(rng);
      unsigned char* at = x.data() + i * item;
      if (dtype == cumulus::DType::kFloat32) {
        const auto f = cumulus::from_double<float>(v);
        std::memcpy(at, &f, sizeof f);
      } else if (dtype == cumulus::DType::kFloat64) {
        std::memcpy(at, &v, sizeof v);
      } else if (dtype == cumulus::DType::kFloat16) {
        const auto h = cumulus::from_double<cumulus::Float16>(v);
        std::memcpy(at, &h, sizeof h);
      } else {
        const auto h = cumulus::from_double<cumulus::BFloat16>(v);
        std::memcpy(at, &h, sizeof h);
      }
    }
    const int64_t shape[1] = {n};
    const cumulus::ConstTensorView xv(dtype, shape, x.data());
    const cumulus::TensorView yv{dtype, shape, y.data()};
    const cumulus::ConstTensorView three[3] = {xv, xv, xv};
    std::vector<double> ns;
    for (long long r = 0; r < rounds; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      if (op == "sum") {
        for (long long c = 0; c < calls; ++c) cumulus::sum(three, yv);
      } else if (product) {
        for (long long c = 0; c < calls; ++c) cumulus::cumprod(xv, 0, yv);
      } else {
        for (long long c = 0; c < calls; ++c) cumulus::cumsum(xv, 0, yv);
      }
      const auto t1 = std::chrono::steady_clock::now();
      ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                   static_cast<double>(calls));
    }
    std::sort(ns.begin(), ns.end());
    std::printf("%s %s [%lld]: %.1f ns a call (rounds %.1f-%.1f)\n", op.c_str(),
                std::string(cumulus::dtype_name(dtype)).c_str(), static_cast<long long>(n),
                ns[ns.size() / 2], ns.front(), ns.back());
  }
  return 0;
}
