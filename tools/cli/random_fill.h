// The values `cumulus perf --input NAME=random:DIMS` makes: uniform [-1, 1) for floating types,
// uniform integers in [-100, 100] ([0, 100] for unsigned ones). bench_kernels --case fills its
// inputs with this too, so that value-dependent paths (a product that underflows, a carry far
// above its block) are the ones a perf run of the same workload takes.
#pragma once

#include <cstdint>
#include <random>
#include <type_traits>

#include "cumulus/tensor.h"

namespace cumulus::cli {

inline void fill_random(Tensor& t, DType dtype, std::mt19937_64& rng) {
  visit_dtype(dtype, [&]<class T>(T) {
    T* p = t.data<T>();
    if constexpr (std::is_integral_v<T>) {
      std::uniform_int_distribution<int64_t> dist(std::is_signed_v<T> ? -100 : 0, 100);
      for (int64_t i = 0; i < t.size(); ++i) p[i] = static_cast<T>(dist(rng));
    } else {
      std::uniform_real_distribution<double> dist(-1.0, 1.0);
      for (int64_t i = 0; i < t.size(); ++i) p[i] = from_double<T>(dist(rng));
    }
  });
}

}  // namespace cumulus::cli
