// A small fixed pool that hands index ranges to kernels. Chunk boundaries depend only on the
// count and grain, never on the number of threads, so results cannot depend on it either.
#pragma once

#include <cstddef>
#include <type_traits>

namespace cumulus::detail {

using RangeFn = void (*)(const void* context, std::size_t begin, std::size_t end);
void parallel_for_impl(std::size_t count, std::size_t grain, RangeFn fn, const void* context);

// Calls body(begin, end) for [0, count) cut into chunks of `grain` (the last may be shorter),
// on the pool's threads and the caller's. Small counts run inline with no synchronisation.
template <class Body>
void parallel_for(std::size_t count, std::size_t grain, const Body& body) {
  parallel_for_impl(
      count, grain,
      [](const void* context, std::size_t begin, std::size_t end) {
        (*static_cast<const Body*>(context))(begin, end);
      },
      &body);
}

// How many threads a parallel_for called here may run at once: 1 within a pool thread's chunk
// (a nested call runs inline), else the pool's size.
std::size_t parallel_width() noexcept;

}  // namespace cumulus::detail
