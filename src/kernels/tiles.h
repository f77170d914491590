// The kernels' compile-time tile and lane counts, in one place. Results never depend on the
// tiles (columns and Sum outputs are independent of each other); they set how much working state
// stays in L1. kFloatLanes does shape results: see below.
#pragma once

#include <cstddef>

namespace cumulus::detail {

// Columns of a scan along an outer axis whose accumulators one pass keeps on the stack. The ops
// layer's default column_tile (src/ops/tuning.h) is this, so each task is one kernel tile.
inline constexpr std::size_t kScanColumnTile = 1024;

// Columns of a floating CumSum's exact scan (exact_cols.inc) taken a step at a time: each step
// reads a row of the tile from another page, and its pairs' state (six arrays of doubles) stays in
// L1. float32 [4096,16384] along axis 0, two threads (`cumulus perf`, medians of 7, four rounds
// alternated, Zen 5): 12.6-17.7 ms at 256, 13.6-15.6 at 512, 13.6-17.7 at 1024 with AVX-512;
// 16.6-19.0, 14.6-15.5 and 15.9-19.0 with AVX2. On a Zen 4 (four rounds): 18.8-19.1 ms at 512,
// 15.9-17.6 at 256 with AVX-512, 21.0-22.3 and 17.4-18.7 with AVX2; [8,4096,2048] along axis 1
// 21.1-22.9 and 17.2-18.5, 23.5-26.0 and 18.9-21.0; 1024 slower than 512 on both, 128 mixed
// (AVX2 faster, AVX-512 slower than 256). Timing only: the columns are independent.
inline constexpr std::size_t kExactColumnTile = 256;

// Outputs of a Sum row accumulated at a time by the scalar loop.
inline constexpr std::size_t kSumChunk = 256;

// Lanes of the floating-point vectors (eight doubles), and the partial sums of a floating row's
// total on every instruction set: the scalar kernels keep eight too, so the totals' tree, and
// their bits, are the same everywhere.
inline constexpr std::size_t kFloatLanes = 8;

// Terms of a floating CumProd row rounded as one span (prod.inc): its evaluation order, so the
// pieces the ops layer cuts such rows into are whole spans (one to kMaxSpansPerPiece). A multiple
// of 64 (float64 cuts a span into eight regions of a multiple of eight terms each), and not of
// 512: with 4096 a float64 span's regions lay 4 KiB apart, so the eight loads and eight stores of
// each step of its outputs met in one set of the L1 cache (Compute/CumProd/float64 on a Zen 4 core,
// AVX-512: 0.78-0.87 G elements/s at 4096, 1.19-1.37 at 4160).
inline constexpr std::size_t kProductSpan = 4160;
// The most spans of a floating CumProd in one piece of a long row: its spans' totals share a
// round's slots, and a chained piece's kernel holds each span's first pass until its carry comes.
inline constexpr std::size_t kMaxSpansPerPiece = 8;

// The most elements of a piece of a long float64 CumSum row that a kernel scans chained
// (ScanKernels::chained): its first pass keeps what it found of each block of 2048 for the scan.
// On a Xeon (2 MiB L2), float64 [32M] on two threads (bench_kernels --case, medians of 5, two
// runs): 2^17 23.0-23.2 ms with AVX-512, 31.1-31.3 with AVX2; 2^16 23.3-24.1, 30.2-31.0; 2^15
// 21.3-21.9, 23.6-23.8; 2^14 24.4-25.2, 28.2-29.1. With the first pass asking a segment ahead
// (exact_f64_rows.inc), still: 2^15 19.5-20.1 and 19.7-20.2, 2^14 21.0-21.7 and 21.6-22.0, 2^16
// 19.7-20.3 and 20.7-21.0.
inline constexpr std::size_t kMaxF64ChainedPiece = std::size_t{1} << 15;

// How far ahead of its reads a streaming loop asks for its input (vec.inc's prefetch_ahead). With
// the hardware prefetcher alone, a row scan's loads waited on memory while its arithmetic idled,
// and the other way round: asking this far ahead lets the two overlap (float32 [4096,16384] along
// rows, two threads: 33 ms without, 27 with 4 KiB, 24 with 8 and with 16 KiB). Timing only:
// results never depend on it.
inline constexpr std::ptrdiff_t kPrefetchBytes = 8192;
// How far ahead a Sum asks for each of its streamed inputs: kPrefetchBytes shared between them,
// whole lines, so that the lines asked for and not yet read stay within the L1 (48 KiB here) with
// the loop's own. Each input kPrefetchBytes ahead overran it: Sum of 8 x [1024,16384] float32,
// two threads, 25-37 ms prefetching, 18-23 ms not. Shared, on the Xeon (AVX2 table, two threads,
// `bench_kernels --case`, medians of 3): float32 3 x [4096,16384] 29.9-30.0 -> 26.4-27.3 ms
// (each input 8 KiB ahead -> 3 KiB), 8 x [1024,16384] 22.7-23.5 -> 19.7-20.3 (none -> 1 KiB);
// float16 3 x [4096,16384] 17.1-17.5 -> 15.8-16.2. Timing only.
inline constexpr std::size_t kSumPrefetchStreams = 16;
inline std::ptrdiff_t sum_prefetch_bytes(std::size_t streams) {
  if (streams == 0 || streams > kSumPrefetchStreams) return 0;
  return kPrefetchBytes / static_cast<std::ptrdiff_t>(streams) / 64 * 64;
}

// The most lanes of any vector: 32-bit integers in AVX-512.
inline constexpr std::size_t kMaxLanes = 16;

}  // namespace cumulus::detail
