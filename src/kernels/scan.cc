// Portable scan kernels: the reference path every instruction set must match bit for bit.
#include <algorithm>

#include "kernels/kernels.h"
#include "kernels/numeric.h"

namespace cumulus::detail {
namespace {

// Columns are scanned a tile at a time so the accumulators stay in L1.
constexpr std::size_t kTile = 256;

template <class T, class Op, bool kExclusive, bool kReverse>
void scan_slab(const T* x, T* y, std::size_t length, std::size_t inner, std::size_t col_begin,
               std::size_t col_end) noexcept {
  using N = Numeric<T>;
  using W = typename N::Wide;
  W acc[kTile];
  const std::size_t first = kReverse ? length - 1 : 0;
  for (std::size_t c0 = col_begin; c0 < col_end; c0 += kTile) {
    const std::size_t width = std::min(kTile, col_end - c0);
    // The first element starts the accumulator rather than being added to an identity, so an
    // inclusive scan copies it as is (-0.0 stays -0.0); an exclusive scan writes the identity.
    {
      const T* xr = x + first * inner + c0;
      T* yr = y + first * inner + c0;
      for (std::size_t j = 0; j < width; ++j) {
        acc[j] = N::widen(xr[j]);
        yr[j] = kExclusive ? N::narrow(Op::template identity<W>()) : N::narrow(acc[j]);
      }
    }
    for (std::size_t step = 1; step < length; ++step) {
      const std::size_t i = kReverse ? length - 1 - step : step;
      const T* xr = x + i * inner + c0;
      T* yr = y + i * inner + c0;
      for (std::size_t j = 0; j < width; ++j) {
        const W v = N::widen(xr[j]);  // read before the write: y may be x
        if constexpr (kExclusive) {
          yr[j] = N::narrow(acc[j]);
          acc[j] = Op::apply(acc[j], v);
        } else {
          acc[j] = Op::apply(acc[j], v);
          yr[j] = N::narrow(acc[j]);
        }
      }
    }
  }
}

template <class T, class Op, bool kExclusive, bool kReverse>
void scan_blocks(const ScanBlock& b) noexcept {
  const T* x = static_cast<const T*>(b.x);
  T* y = static_cast<T*>(b.y);
  const std::size_t slab = b.length * b.inner;
  for (std::size_t o = 0; o < b.outer; ++o) {
    scan_slab<T, Op, kExclusive, kReverse>(x + o * slab, y + o * slab, b.length, b.inner,
                                           b.col_begin, b.col_end);
  }
}

template <class T, class Op>
void scan(const ScanBlock& b) noexcept {
  if (b.exclusive) {
    b.reverse ? scan_blocks<T, Op, true, true>(b) : scan_blocks<T, Op, true, false>(b);
  } else {
    b.reverse ? scan_blocks<T, Op, false, true>(b) : scan_blocks<T, Op, false, false>(b);
  }
}

}  // namespace

void sum_kernels_scalar(KernelTable& table) noexcept;

const KernelTable& scalar_kernels() noexcept {
  static const KernelTable table = [] {
    KernelTable t{};
    t.isa = "scalar";
    for (DType d : kAllDTypes) {
      visit_dtype(d, [&]<class T>(T) {
        t.cumsum[static_cast<int>(d)] = &scan<T, AddOp>;
        t.cumprod[static_cast<int>(d)] = &scan<T, MulOp>;
      });
    }
    sum_kernels_scalar(t);
    return t;
  }();
  return table;
}

const KernelTable& kernels() noexcept { return scalar_kernels(); }

}  // namespace cumulus::detail
