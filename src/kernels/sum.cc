// Portable Sum kernel: one pass over every operand, accumulated left to right in double.
#include <algorithm>

#include "kernels/kernels.h"
#include "kernels/numeric.h"

namespace cumulus::detail {
namespace {

constexpr std::size_t kChunk = 256;

template <class T>
void sum_row(const SumRow& r) noexcept {
  using N = Numeric<T>;
  using W = typename N::Wide;
  T* y = static_cast<T*>(r.y);
  W acc[kChunk];
  for (std::size_t c0 = 0; c0 < r.count; c0 += kChunk) {
    const std::size_t width = std::min(kChunk, r.count - c0);
    for (std::size_t k = 0; k < r.num_inputs; ++k) {
      const T* in = static_cast<const T*>(r.inputs[k]);
      if (r.steps[k] == 0) {
        const W v = N::widen(in[0]);
        for (std::size_t j = 0; j < width; ++j) acc[j] = k == 0 ? v : acc[j] + v;
      } else {
        in += c0;
        for (std::size_t j = 0; j < width; ++j)
          acc[j] = k == 0 ? N::widen(in[j]) : acc[j] + N::widen(in[j]);
      }
    }
    for (std::size_t j = 0; j < width; ++j) y[c0 + j] = N::narrow(acc[j]);
  }
}

}  // namespace

void sum_kernels_scalar(KernelTable& table) noexcept {
  table.sum[static_cast<int>(DType::kFloat32)] = &sum_row<float>;
  table.sum[static_cast<int>(DType::kFloat64)] = &sum_row<double>;
  table.sum[static_cast<int>(DType::kFloat16)] = &sum_row<Float16>;
  table.sum[static_cast<int>(DType::kBFloat16)] = &sum_row<BFloat16>;
}

}  // namespace cumulus::detail
