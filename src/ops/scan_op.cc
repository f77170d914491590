// CumSum and CumProd: validation, then the kernel over fixed parallel chunks.
#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <optional>
#include <vector>

#include "core/fail.h"
#include "core/float_env.h"
#include "core/parallel.h"
#include "kernels/kernels.h"
#include "ops/checks.h"
#include "ops/long_line.h"
#include "ops/tuning.h"

namespace cumulus {
namespace detail {

void check_no_partial_overlap(std::string_view op, std::string_view out_name, const void* out,
                              std::size_t out_bytes, std::string_view in_name, const void* in,
                              std::size_t in_bytes) {
  if (out == in || out_bytes == 0 || in_bytes == 0) return;
  const auto o = reinterpret_cast<std::uintptr_t>(out);
  const auto i = reinterpret_cast<std::uintptr_t>(in);
  if (o < i + in_bytes && i < o + out_bytes) {
    fail(ErrorCode::kInvalidArgument,
         "{}: output '{}' partly overlaps input '{}'; pass the same buffer to work in place, or "
         "separate buffers",
         op, out_name, in_name);
  }
}

void fail_axis_type(std::string_view op, std::string_view type, std::string_view where) {
  fail(ErrorCode::kInvalidArgument, "{}: input 'axis' must be int32 or int64, not {}{}", op, type,
       where);
}

void check_data(std::string_view op, std::string_view name, const void* data, int64_t count) {
  if (data == nullptr && count > 0) {
    fail(ErrorCode::kInvalidArgument, "{}: '{}' has {} elements but no data", op, name, count);
  }
}

ScanLayout check_scan(OpKind op, ConstTensorView x, int64_t axis, TensorView y) {
  const std::string_view name = op_name(op);
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) {
    fail(ErrorCode::kInvalidArgument,
         "{}: input 'x' is a scalar (rank 0), which has no axis to scan along", name);
  }
  if (axis < -rank || axis >= rank) {
    fail(ErrorCode::kInvalidArgument,
         "{}: axis {} is out of range for input 'x' of rank {} (shape {}); valid: [{}, {}]", name,
         axis, rank, shape_string(x.shape), -rank, rank - 1);
  }
  if (y.dtype != x.dtype) {
    fail(ErrorCode::kInvalidArgument, "{}: output 'y' has type {} but input 'x' has type {}", name,
         dtype_name(y.dtype), dtype_name(x.dtype));
  }
  if (!std::ranges::equal(x.shape, y.shape)) {
    fail(ErrorCode::kInvalidArgument, "{}: output 'y' has shape {} but input 'x' has shape {}",
         name, shape_string(y.shape), shape_string(x.shape));
  }
  const int64_t count = element_count(x.shape);
  check_data(name, "x", x.data, count);
  check_data(name, "y", y.data, count);
  const std::size_t bytes = byte_size(x, count);
  check_no_partial_overlap(name, "y", y.data, bytes, "x", x.data, bytes);
  ScanLayout layout;
  layout.count = count;
  layout.bytes = bytes;
  if (count == 0) return layout;
  const auto a = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
  for (std::size_t d = 0; d < a; ++d) layout.outer *= static_cast<std::size_t>(x.shape[d]);
  for (std::size_t d = a + 1; d < x.shape.size(); ++d) {
    layout.inner *= static_cast<std::size_t>(x.shape[d]);
  }
  layout.length = static_cast<std::size_t>(x.shape[a]);
  return layout;
}

}  // namespace detail

namespace {

// A long row is cut into pieces (Tuning::piece), so the threads share one long scan: the pieces'
// totals, then each piece's carry (everything before it, in scan order), then the pieces scanned
// from their carries, a round of pieces at a time. The cut depends on the row's length and the
// tuning alone, never on the number of threads, so neither do the results. A piece's total is
// taken in units of `unit` elements (a whole piece, but for floating CumProd, whose chain of
// spans a piece's scan continues span by span), combined one unit at a time. Returns the carry
// after the row: `before` (null: nothing) with every unit added. Long rows scanned in place take
// it (scan_split_row would read a segment's terms after another thread's scan overwrote them).
detail::Carry scan_long_row(const detail::ScanKernels& kernel, const detail::Tuning& tuning,
                            std::size_t piece_length, std::size_t unit, const std::byte* x,
                            std::byte* y, std::size_t length, std::size_t item, ScanOptions options,
                            const detail::Carry* before) {
  const std::size_t units_per_piece = piece_length / unit;
  const std::size_t per_round =
      std::min(tuning.pieces_per_round, detail::kMaxPiecesPerRound / units_per_piece);
  const std::size_t pieces = (length + piece_length - 1) / piece_length;
  // The part of the row `size` elements long (or less, at its end) `from_start` elements into the
  // scan: forward from the start, or backward from the end. Returns its start and length.
  const auto part = [&](std::size_t from_start, std::size_t size) {
    const std::size_t n = std::min(size, length - from_start);
    return std::pair{options.reverse ? length - from_start - n : from_start, n};
  };
  const bool stream = detail::stream_rows(tuning, kernel, length * item, x == y);
  std::array<detail::Carry, detail::kMaxPiecesPerRound> totals{}, carries{};
  detail::Carry running = before != nullptr ? *before : detail::Carry{};
  bool fresh = before == nullptr;
  for (std::size_t first = 0; first < pieces; first += per_round) {
    const std::size_t count = std::min(per_round, pieces - first);
    detail::parallel_for(count, 1, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const std::size_t from_start = (first + i) * piece_length;
        for (std::size_t u = 0; u < units_per_piece && from_start + u * unit < length; ++u) {
          const auto [start, n] = part(from_start + u * unit, unit);
          totals[i * units_per_piece + u] = kernel.total(x + start * item, n);
        }
      }
    });
    const bool fresh_round = fresh;
    for (std::size_t i = 0; i < count; ++i) {
      carries[i] = running;
      const std::size_t from_start = (first + i) * piece_length;
      for (std::size_t u = 0; u < units_per_piece && from_start + u * unit < length; ++u) {
        const detail::Carry& total = totals[i * units_per_piece + u];
        running = fresh ? total : kernel.combine(running, total);
        fresh = false;
      }
    }
    detail::parallel_for(count, 1, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const auto [start, n] = part((first + i) * piece_length, piece_length);
        kernel.rows({x + start * item, y + start * item, 1, n, options.exclusive, options.reverse,
                     fresh_round && first + i == 0 ? nullptr : &carries[i], stream});
      }
    });
  }
  return running;
}

// A long row, not in place, cut once into a segment per thread and read from memory once: thread
// 0 scans the first segment (in scan order) from `before`; thread t > 0 totals segment t - 1, which
// thread t - 1 scans beside it, in units of `unit` elements, folds those totals one by one into the
// carry before segment t - 1 (as thread t - 1 publishes it) and scans segment t from the result.
// The carries are the same folds of the same units' totals as one pass's (the units of a floating
// CumProd are its spans, whose chain the scans continue; any other scan's carries have one value
// however the row is cut), so the cut, which depends on the number of threads, cannot change the
// bits. A segment's total costs `total_share` of its scan, so each segment is shorter than the one
// before by that share of it and the threads finish together (two threads, `total_share` 1/2: the
// first segment twice as long as the second). Segments start at multiples of `align`, a multiple of
// `unit` unless the unit is the whole segment (unit 0). Returns the carry after the row where
// `carry_after`.
std::optional<detail::Carry> scan_split_row(const detail::ScanKernels& kernel,
                                            const detail::Tuning& tuning, std::size_t align,
                                            std::size_t unit, double total_share,
                                            const std::byte* x, std::byte* y, std::size_t length,
                                            std::size_t item, ScanOptions options,
                                            const detail::Carry* before, bool carry_after) {
  const std::size_t width =
      std::clamp<std::size_t>(std::min(detail::parallel_width(), length / align), 1, length);
  // Segment t: [cut[t], cut[t + 1]) elements into the scan.
  const std::vector<std::size_t> cut = detail::split_cuts(length, width, total_share, align);
  const auto part = [&](std::size_t from_start, std::size_t n) {
    return std::pair{options.reverse ? length - from_start - n : from_start, n};
  };
  // Calls `take` with the totals of segment t's units in scan order.
  const auto each_total = [&](std::size_t t, const auto& take) {
    const std::size_t size = unit == 0 ? cut[t + 1] - cut[t] : unit;
    for (std::size_t from = cut[t]; from < cut[t + 1]; from += size) {
      const auto [start, n] = part(from, std::min(size, cut[t + 1] - from));
      take(kernel.total(x + start * item, n));
    }
  };
  const bool stream = detail::stream_rows(tuning, kernel, length * item, x == y);
  // carries[t]: everything before segment t (where has[t]; else nothing), published by ready[t].
  std::vector<detail::Carry> carries(width);
  std::vector<char> has(width, 0);
  std::vector<std::atomic<bool>> ready(width);
  if (before != nullptr) carries[0] = *before;
  has[0] = before != nullptr;
  ready[0].store(true, std::memory_order_relaxed);
  // Folds `total` into the carry of segment t.
  const auto fold = [&](std::size_t t) {
    return [&, t](const detail::Carry& total) {
      carries[t] = has[t] ? kernel.combine(carries[t], total) : total;
      has[t] = 1;
    };
  };
  std::optional<detail::Carry> after;
  detail::parallel_for(width, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t t = begin; t < end; ++t) {
      if (t > 0) {
        // The units' totals go straight into the carry where the one before segment t - 1 is
        // known (always for t == 1); else they wait in a list for it.
        std::vector<detail::Carry> waiting;
        const bool known = ready[t - 1].load(std::memory_order_acquire);
        if (!known)
          each_total(t - 1, [&](const detail::Carry& total) { waiting.push_back(total); });
        ready[t - 1].wait(false, std::memory_order_acquire);
        carries[t] = carries[t - 1];
        has[t] = has[t - 1];
        if (known) each_total(t - 1, fold(t));
        std::ranges::for_each(waiting, fold(t));
        ready[t].store(true, std::memory_order_release);
        ready[t].notify_all();
      }
      const auto [start, n] = part(cut[t], cut[t + 1] - cut[t]);
      if (n > 0)
        kernel.rows({x + start * item, y + start * item, 1, n, options.exclusive, options.reverse,
                     has[t] ? &carries[t] : nullptr, stream});
      if (carry_after && t + 1 == width) {
        // The row kernel does not return the carry after it, so the last segment's terms are
        // read again (chunked scans only); carries[t] is this thread's alone now.
        each_total(t, fold(t));
        after = carries[t];
      }
    }
  });
  return after;
}

// The blocks a long row's threads claim in turn: the tuning's piece, or up to four pieces where
// the row still holds 64 blocks: fewer hand-offs, and the totals' passes longer (two threads,
// alternated, five rounds: int32 [64M] 12.3-14.0 -> 11.5-13.3 ms with AVX-512, 12.9-13.2 ->
// 11.5-11.7 with AVX2; float64 [32M] 17.1-18.0 -> 16.6-17.5 and 19.2-20.1 -> 18.9-19.1; eight and
// sixteen pieces no faster than four, sixteen slower). Any cut gives the same bits.
std::size_t lookback_block(const detail::Tuning& tuning, std::size_t length) {
  return std::max(tuning.piece, std::min(4 * tuning.piece, length / 64));
}

// A long row of integers (wrapping sums, products) or a float64 CumSum (exact sums) where the
// kernels have no chained scan (the scalar table), not a floating CumProd (whose spans fix the
// cut): cut into blocks of the tuning's piece, which the
// threads claim in scan order. A block's total brings it into its thread's cache; the thread
// publishes it, takes the carry before the block from the blocks before (decoupled look-back: the
// nearest block whose carry after it is known, plus the totals of the blocks after that one),
// publishes the carry after the block and scans it from the cache (the decoupled look-back of
// Merrill and Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", NVIDIA 2016, on
// a CPU's threads). The row is read from memory once, with no round for the threads to wait at, and
// in place works too (a block's total and its scan are one thread's, one after the other). A block
// waits only on blocks claimed before it, each by a thread at work, so the claims cannot deadlock.
// Any cut gives the same bits: the carries combine exactly. Returns the carry after the row.
detail::Carry scan_lookback_row(const detail::ScanKernels& kernel, const detail::Tuning& tuning,
                                const std::byte* x, std::byte* y, std::size_t length,
                                std::size_t item, ScanOptions options,
                                const detail::Carry* before) {
  const std::size_t block = lookback_block(tuning, length);
  const std::size_t blocks = (length + block - 1) / block;
  const bool stream = detail::stream_rows(tuning, kernel, length * item, x == y);
  enum : int { kNothing = 0, kTotal = 1, kCarryAfter = 2 };
  struct State {
    std::atomic<int> known{kNothing};
    detail::Carry total, after;  // written before `known` says so
  };
  std::vector<State> states(blocks);
  std::atomic<std::size_t> next{0};
  const auto publish = [&](State& state, int what) {
    state.known.store(what, std::memory_order_release);
    state.known.notify_all();
  };
  detail::parallel_for(detail::parallel_width(), 1, [&](std::size_t, std::size_t) {
    for (std::size_t k = next.fetch_add(1, std::memory_order_relaxed); k < blocks;
         k = next.fetch_add(1, std::memory_order_relaxed)) {
      const std::size_t from_start = k * block;
      const std::size_t n = std::min(block, length - from_start);
      const std::size_t start = options.reverse ? length - from_start - n : from_start;
      State& self = states[k];
      self.total = kernel.total(x + start * item, n);
      // The carry before block k: `before` and every block before k. Block 0 publishes only its
      // carry after it, so every look-back ends at a block that has.
      std::optional<detail::Carry> carry;
      if (k == 0) {
        if (before != nullptr) carry = *before;
      } else {
        publish(self, kTotal);
        for (std::size_t j = k; j-- > 0;) {
          int known;
          while ((known = states[j].known.load(std::memory_order_acquire)) == kNothing) {
            states[j].known.wait(kNothing, std::memory_order_acquire);
          }
          const detail::Carry& part = known == kCarryAfter ? states[j].after : states[j].total;
          carry = carry ? kernel.combine(part, *carry) : part;
          if (known == kCarryAfter) break;
        }
      }
      self.after = carry ? kernel.combine(*carry, self.total) : self.total;
      publish(self, kCarryAfter);
      kernel.rows({x + start * item, y + start * item, 1, n, options.exclusive, options.reverse,
                   carry ? &*carry : nullptr, stream});
    }
  });
  return states.back().after;
}

// Blocks claimed in turn (from the row's end for a backward scan), for the kernels that scan a
// piece from a hand-off (ScanKernels::chained): a block's kernel forms its totals (a floating
// CumProd's: its spans'), takes the carry after the block before it (a strict chain: the totals
// fold into it one by one, in order, so the bits are one pass's), publishes its own, then scans
// from that carry. Each block is read from memory once: the totals are its scan's own first pass,
// and the scan's second finds the block in the cache. Returns the carry after the row.
detail::Carry scan_chained_row(const detail::ScanKernels& kernel, std::size_t block,
                               const detail::Tuning& tuning, const std::byte* x, std::byte* y,
                               std::size_t length, std::size_t item, ScanOptions options,
                               const detail::Carry* before) {
  const std::size_t blocks = (length + block - 1) / block;
  const bool stream = detail::stream_rows(tuning, kernel, length * item, x == y);
  struct State {
    std::atomic<bool> known{false};
    detail::Carry after;  // written before `known` says so
  };
  std::vector<State> states(blocks);
  struct Handoff {
    const detail::ScanKernels& kernel;
    std::vector<State>& states;
    const detail::Carry* before;
    std::size_t k;
  };
  const auto handoff = [](void* context, const detail::Carry* totals, std::size_t count,
                          detail::Carry* carry_before) {
    const auto& h = *static_cast<Handoff*>(context);
    std::optional<detail::Carry> carry;
    if (h.k == 0) {
      if (h.before != nullptr) carry = *h.before;
    } else {
      State& prev = h.states[h.k - 1];
      while (!prev.known.load(std::memory_order_acquire)) {
        prev.known.wait(false, std::memory_order_acquire);
      }
      carry = prev.after;
    }
    std::optional<detail::Carry> after = carry;
    for (std::size_t u = 0; u < count; ++u) {
      after = after ? h.kernel.combine(*after, totals[u]) : totals[u];
    }
    State& self = h.states[h.k];
    self.after = *after;
    self.known.store(true, std::memory_order_release);
    self.known.notify_all();
    if (carry) *carry_before = *carry;
    return carry.has_value();
  };
  std::atomic<std::size_t> next{0};
  detail::parallel_for(detail::parallel_width(), 1, [&](std::size_t, std::size_t) {
    for (std::size_t k = next.fetch_add(1, std::memory_order_relaxed); k < blocks;
         k = next.fetch_add(1, std::memory_order_relaxed)) {
      const std::size_t n = std::min(block, length - k * block);
      const std::size_t start = options.reverse ? length - k * block - n : k * block;
      Handoff h{kernel, states, before, k};
      kernel.chained({x + start * item, y + start * item, n, options.exclusive, options.reverse,
                      stream, handoff, &h});
    }
  });
  return states.back().after;
}

}  // namespace

namespace detail {

std::vector<std::size_t> split_cuts(std::size_t length, std::size_t width, double total_share,
                                    std::size_t align) {
  std::vector<double> weight(width, 1.0);
  for (std::size_t t = 1; t < width; ++t) weight[t] = 1.0 - total_share * weight[t - 1];
  double whole = 0;
  for (const double w : weight) whole += w;
  std::vector<std::size_t> cut(width + 1, length);
  cut[0] = 0;
  double so_far = 0;
  for (std::size_t t = 1; t < width; ++t) {
    so_far += weight[t - 1];
    const auto at = static_cast<std::size_t>(static_cast<double>(length) * (so_far / whole));
    cut[t] = std::clamp(at / align * align, cut[t - 1], length);
  }
  return cut;
}

std::optional<Carry> scan_long_line(OpKind op, DType dtype, const std::byte* x, std::byte* y,
                                    std::size_t length, ScanOptions options, const Carry* start,
                                    bool carry_after) {
  const Tuning tuning = detail::tuning();
  const KernelTable& table = tuning.kernel_table();
  const ScanKernels& kernel =
      (op == OpKind::kCumSum ? table.cumsum : table.cumprod)[static_cast<int>(dtype)];
  // Floating CumProd rounds in a fixed chain of spans (kernels/prod.inc): pieces of whole spans
  // (the tuning's piece, rounded, at most kMaxSpansPerPiece), whose carries combine the spans'
  // totals one by one, continue that chain, so its bits do not depend on the tuning either.
  const bool spans = op == OpKind::kCumProd && is_floating(dtype);
  const std::size_t unit = spans ? kProductSpan : tuning.piece;
  const std::size_t piece =
      spans ? std::clamp<std::size_t>(tuning.piece / unit, 1, detail::kMaxSpansPerPiece) * unit
            : unit;
  // Blocks chained from thread to thread where the kernels can. A floating CumProd row in blocks
  // of a piece, either way: two threads, alternated, four rounds, float64 [32M] forward 21.0-29.2
  // -> 20.0-23.2 ms with AVX-512, 24.5-37.2 -> 20.0-22.8 with AVX2, against the cut per thread
  // below; backward, three rounds, float64 [32M] 25.4-27.2 -> 19.2-22.0 and 34.5-37.2 ->
  // 23.3-25.6, float32 [64M] 31.9-37.5 -> 18.5-26.0 and 38.0-39.1 -> 26.6-34.6. A float64 CumSum
  // row (the vector tables) in the look-back's blocks: a block's first pass forms its total and
  // what its scan needs of it, so that pass is the only one from memory and none is made twice.
  // The look-back below made its total pass and then the scan's own first pass from the cache:
  // against it, two threads, alternated, four rounds, float64 [32M] 19.9-20.7 -> 15.0-16.8 ms
  // with AVX2, 15.5-18.2 -> 13.8-16.1 with AVX-512.
  if (kernel.chained != nullptr && detail::parallel_width() > 1) {
    const std::size_t block =
        spans ? piece : std::min(lookback_block(tuning, length), detail::kMaxF64ChainedPiece);
    const detail::Carry after =
        scan_chained_row(kernel, block, tuning, x, y, length, dtype_size(dtype), options, start);
    return carry_after ? std::optional{after} : std::nullopt;
  }
  // Look-back (blocks claimed in turn) where it measured faster than the cut per thread below:
  // two threads, [64M] int32 21-26 -> 17-22 ms, [32M] float64 48-51 -> 36-39 ms; float32 and
  // bfloat16 level, float16 [64M] and float32 [32,128256] 5-15% slower, so those keep the cut.
  if ((!is_floating(dtype) || (op == OpKind::kCumSum && dtype == DType::kFloat64)) &&
      detail::parallel_width() > 1) {
    const detail::Carry after =
        scan_lookback_row(kernel, tuning, x, y, length, dtype_size(dtype), options, start);
    return carry_after ? std::optional{after} : std::nullopt;
  }
  if (x != y) {  // in place, a segment's scan would overwrite what its total reads
    // A total's cost over its scan's, each read from memory, two threads, as measured on a Zen 5
    // (`cumulus perf`, medians of 7, alternated): CumSum float32 [64M] 5% faster at 0.35 than at
    // 0.5, float16 and bfloat16 [64M] 9-15% faster at 0.25 (their scans cost more against their
    // totals). On a Zen 4 a float32 CumSum total costs 0.21-0.24 of its scan in cache
    // (Compute/CumSumTotal), and [64M] took 20.3-20.9 ms at 0.25 against 21.4-21.6 at 0.35 and
    // 21.0-21.4 at 0.2 (AVX2 21.4-21.6, 22.4-22.7, 21.8-22.6). The half types' scans cost more
    // against their totals: in cache on a Zen 4 core (AVX-512) a float16 total 0.16 of its scan,
    // a bfloat16 one 0.20 (Compute/CumSumTotal over Compute/CumSum); at those shares, [64M] with
    // two threads, five rounds alternated, medians: float16 18.9 -> 18.5 ms (AVX2 32.1 -> 29.7),
    // bfloat16 19.0 -> 18.3 (AVX2 27.4 both). Floating CumProd comes here on one thread only (one
    // segment; several chain their pieces above).
    const double share = dtype == DType::kFloat16 ? 0.16 : dtype == DType::kBFloat16 ? 0.2 : 0.25;
    return scan_split_row(kernel, tuning, piece, spans ? unit : 0, share, x, y, length,
                          dtype_size(dtype), options, start, carry_after);
  }
  return scan_long_row(kernel, tuning, piece, unit, x, y, length, dtype_size(dtype), options,
                       start);
}

}  // namespace detail

namespace {

void scan(OpKind op, ConstTensorView x, int64_t axis, TensorView y, ScanOptions options) {
  const detail::DefaultFloatEnvironment environment;
  // Named copies, not structured bindings: lambdas below capture them (clang 14 cannot capture a
  // structured binding).
  const detail::ScanLayout layout = detail::check_scan(op, x, axis, y);
  const std::size_t outer = layout.outer, length = layout.length, inner = layout.inner;
  const int64_t count = layout.count;
  const std::size_t bytes = layout.bytes;
  if (count == 0) return;
  const detail::Tuning tuning = detail::tuning();
  const detail::KernelTable& table = tuning.kernel_table();
  const detail::ScanKernels& kernel =
      (op == OpKind::kCumSum ? table.cumsum : table.cumprod)[static_cast<int>(x.dtype)];
  const std::size_t item = dtype_size(x.dtype);
  const auto* xb = static_cast<const std::byte*>(x.data);
  auto* yb = static_cast<std::byte*>(y.data);
  const std::size_t slab = length * inner;
  // Column tiles write a large output past the cache; rows where their kernels gain by it (long
  // rows decide per row).
  const bool stream = x.data != y.data && bytes >= tuning.stream_bytes;
  const bool rows_stream = detail::stream_rows(tuning, kernel, bytes, x.data == y.data);

  // Long rows share a row between the threads, unless there are enough of them (and they are
  // long by the default's measure, whatever the tuning says) to give each thread whole rows
  // evenly: then the rows path below, where no thread totals what another scans.
  const std::size_t width = detail::parallel_width();
  const bool whole_rows = length >= detail::Tuning{}.long_row && outer >= width &&
                          (outer % width == 0 || outer >= 4 * width);
  if (inner == 1 && length >= tuning.long_row && !whole_rows) {
    for (std::size_t o = 0; o < outer; ++o) {
      detail::scan_long_line(op, x.dtype, xb + o * slab * item, yb + o * slab * item, length,
                             options, nullptr, false);
    }
    return;
  }
  if (inner == 1) {
    const std::size_t grain = std::max<std::size_t>(1, tuning.min_chunk_elements / length);
    detail::parallel_for(outer, grain, [&](std::size_t begin, std::size_t end) {
      kernel.rows({xb + begin * slab * item, yb + begin * slab * item, end - begin, length,
                   options.exclusive, options.reverse, nullptr, rows_stream});
    });
    return;
  }
  const std::size_t tile = tuning.column_tile;
  const std::size_t tiles = (inner + tile - 1) / tile;
  const std::size_t tile_elements = length * std::min(inner, tile);
  const std::size_t grain = std::max<std::size_t>(1, tuning.min_chunk_elements / tile_elements);
  detail::parallel_for(outer * tiles, grain, [&](std::size_t begin, std::size_t end) {
    for (std::size_t task = begin; task < end; ++task) {
      const std::size_t o = task / tiles;
      const std::size_t col = (task % tiles) * tile;
      kernel.block({xb + o * slab * item, yb + o * slab * item, 1, length, inner, col,
                    std::min(inner, col + tile), options.exclusive, options.reverse, nullptr,
                    nullptr, stream});
    }
  });
}

Tensor scan_alloc(OpKind op, ConstTensorView x, int64_t axis, ScanOptions options) {
  Tensor y(x.dtype, Shape(x.shape.begin(), x.shape.end()));
  scan(op, x, axis, y.view(), options);
  return y;
}

}  // namespace

void cumsum(ConstTensorView x, int64_t axis, TensorView y, ScanOptions options) {
  scan(OpKind::kCumSum, x, axis, y, options);
}
void cumprod(ConstTensorView x, int64_t axis, TensorView y, ScanOptions options) {
  scan(OpKind::kCumProd, x, axis, y, options);
}
Tensor cumsum(ConstTensorView x, int64_t axis, ScanOptions options) {
  return scan_alloc(OpKind::kCumSum, x, axis, options);
}
Tensor cumprod(ConstTensorView x, int64_t axis, ScanOptions options) {
  return scan_alloc(OpKind::kCumProd, x, axis, options);
}

int64_t scan_axis(OpKind op, ConstTensorView axis) {
  const std::string_view name = op_name(op);
  if (!is_axis_dtype(axis.dtype)) {
    detail::fail_axis_type(name, dtype_name(axis.dtype));
  }
  const bool scalar_like = axis.shape.empty() || (axis.shape.size() == 1 && axis.shape[0] == 1);
  if (!scalar_like) {
    detail::fail(ErrorCode::kInvalidArgument,
                 "{}: input 'axis' must be a 0-D tensor (or a 1-element 1-D tensor), not shape {}",
                 name, shape_string(axis.shape));
  }
  detail::check_data(name, "axis", axis.data, 1);
  return axis.dtype == DType::kInt32 ? *static_cast<const int32_t*>(axis.data)
                                     : *static_cast<const int64_t*>(axis.data);
}

}  // namespace cumulus
