// What `cumulus perf --input NAME=KIND:DIMS` makes: DIMS as 4096x16384 (or 'scalar' for 0-D), KIND
// one of RandomValues: random (uniform in [-1, 1) for floating types, uniform integers in
// [-100, 100], [0, 100] for unsigned ones), normal (standard normal) or unit (uniform in [0, 1));
// the last two for floating types only. bench_kernels --case reads its shapes and fills its inputs
// with these too, so that value-dependent paths (a product that underflows, a carry far above its
// block, an exact sum's certificate) are the ones a perf run of the same workload takes.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <random>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "cumulus/tensor.h"

namespace cumulus::cli {

// The dimensions of DIMS; nothing where it is not a list of non-negative integers joined by 'x'.
inline std::optional<Shape> dims_from_text(std::string_view text) {
  Shape shape;
  if (text == "scalar") return shape;
  for (std::size_t start = 0;;) {
    const std::size_t end = std::min(text.find('x', start), text.size());
    const std::string_view part = text.substr(start, end - start);
    int64_t d = -1;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || d < 0) {
      return std::nullopt;
    }
    shape.push_back(d);
    if (end == text.size()) return shape;
    start = end + 1;
  }
}

enum class RandomValues { kRandom, kNormal, kUnit };

// The kind named `name` (random, normal or unit); nothing for another name.
inline std::optional<RandomValues> random_values_from_text(std::string_view name) {
  if (name == "random") return RandomValues::kRandom;
  if (name == "normal") return RandomValues::kNormal;
  if (name == "unit") return RandomValues::kUnit;
  return std::nullopt;
}

// Whether `values` can fill a tensor of `dtype`: normal and unit make floating values only.
inline bool random_values_fit(RandomValues values, DType dtype) {
  return values == RandomValues::kRandom || is_floating(dtype);
}

// Fills t with values of the kind `values` (which must fit its type) drawn from rng.
inline void fill_random(Tensor& t, std::mt19937_64& rng,
                        RandomValues values = RandomValues::kRandom) {
  visit_dtype(t.dtype(), [&]<class T>(T) {
    T* p = t.data<T>();
    if constexpr (std::is_integral_v<T>) {
      std::uniform_int_distribution<int64_t> dist(std::is_signed_v<T> ? -100 : 0, 100);
      for (int64_t i = 0; i < t.size(); ++i) p[i] = static_cast<T>(dist(rng));
    } else {
      const auto fill = [&](auto dist) {
        for (int64_t i = 0; i < t.size(); ++i) p[i] = from_double<T>(dist(rng));
      };
      if (values == RandomValues::kNormal) {
        fill(std::normal_distribution<double>());
      } else {
        fill(std::uniform_real_distribution<double>(values == RandomValues::kUnit ? 0.0 : -1.0,
                                                    1.0));
      }
    }
  });
}

}  // namespace cumulus::cli
