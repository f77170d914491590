// Google Benchmark over the kernel API: every operator x dtype x layout, from in-cache sizes to
// 512 MB moved, reported in bytes per second (input plus output) next to a memcpy of the same
// bytes and the streaming ceilings (Ceiling/...) in the same process.
// Run: build/bench/bench_kernels [--benchmark_filter=...] [--case=OP:DTYPE:SHAPES:AXIS ...]
//      [--case_threads=N] [--case_values=random|normal|unit]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cumulus/ops.h"
#include "kernels/kernels.h"
#include "ops/long_line.h"
#include "random_input.h"
#include "reduced_scan.h"
#include "streaming.h"

namespace {

using cumulus::DType;
using cumulus::Shape;
using cumulus::Tensor;

// Element counts: in L1/L2, in the last-level cache, and well beyond it.
constexpr int64_t kSizes[] = {int64_t{1} << 10, int64_t{1} << 18, int64_t{1} << 22,
                              int64_t{1} << 26};
constexpr int64_t kMaxBytesMoved = int64_t{512} << 20;

Tensor random_tensor(DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> dist(0.5, 1.5);  // products stay finite for a while
  cumulus::visit_dtype(dtype, [&]<class T>(T) {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.size(); ++i) p[i] = cumulus::from_double<T>(dist(rng));
  });
  return t;
}

void memcpy_bench(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * bytes));
}

// The same copy split over the kernels' thread count, one slice per thread: the floor for
// multithreaded kernels that read and write these bytes once (threads started per copy, which
// costs microseconds, so it is registered for large sizes only).
void memcpy_threads_bench(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto threads = static_cast<std::size_t>(cumulus::num_threads());
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::vector<std::thread> workers;
    for (std::size_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const std::size_t begin = bytes * t / threads, end = bytes * (t + 1) / threads;
        std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
      });
    }
    for (auto& w : workers) w.join();
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * bytes));
}

// One word of every cache line of [p, p + n): what a block's total costs in memory traffic.
uint64_t read_lines(const char* p, std::size_t n) {
  uint64_t acc = 0;
  for (std::size_t i = 0; i < n; i += cumulus::bench::kStreamAlign) {
    uint64_t w;
    std::memcpy(&w, p + i, sizeof w);
    acc += w;
  }
  return acc;
}

// The streaming ceilings (streaming.h): `inputs` buffers of `bytes` each, added into one more with
// non-temporal stores (one input: a copy, the ceiling of a scan of `bytes`; K: of a Sum of K
// same-shape inputs), on the kernels' thread count, chunks taken from a shared counter. Two
// reduced kernels change one thing each: kTotalFirst has a long row's look-back traffic (each
// chunk read once, its total, before it is copied from the cache); kHugeAligned places the
// buffers a multiple of 2 MiB apart, as the library's large tensors are, so that every stream's
// lines share their cache sets.
enum class Pattern { kCeiling, kTotalFirst, kHugeAligned };
void ceiling_bench(benchmark::State& state, int inputs, Pattern pattern) {
  const bool total_first = pattern == Pattern::kTotalFirst;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t kHuge = cumulus::bench::StreamRegion::kHuge;
  const std::size_t stride = pattern == Pattern::kHugeAligned
                                 ? (bytes + kHuge - 1) / kHuge * kHuge
                                 : cumulus::bench::stream_stride(bytes);
  const cumulus::bench::StreamRegion region(stride * static_cast<std::size_t>(inputs + 1));
  if (region.data() == nullptr) {
    state.SkipWithError("cannot allocate the buffers");
    return;
  }
  std::vector<const char*> src;
  for (int j = 0; j < inputs; ++j)
    src.push_back(region.data() + stride * static_cast<std::size_t>(j));
  char* dst = region.data() + stride * static_cast<std::size_t>(inputs);
  cumulus::bench::StreamTeam team(cumulus::num_threads());
  std::atomic<uint64_t> sink{0};
  const auto run = [&](cumulus::bench::StreamIsa isa) {
    team.run(bytes, [&](std::size_t begin, std::size_t end) {
      if (total_first) sink.fetch_add(read_lines(src[0] + begin, end - begin));
      cumulus::bench::stream_add(isa, dst, src.data(), inputs, begin, end);
    });
  };
  // The fastest of the widths streaming.h tries, by the best of three runs each.
  auto isa = cumulus::bench::best_stream_isa();
  double fastest = 0;
  for (const auto candidate : cumulus::bench::stream_isas()) {
    for (int r = 0; r < 3; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      run(candidate);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (fastest == 0 || s < fastest) {
        fastest = s;
        isa = candidate;
      }
    }
  }
  std::memset(dst, 0, bytes);  // so that the check after the runs sees the kernel's work
  for (auto _ : state) {
    run(isa);
    benchmark::ClobberMemory();
  }
  if (!cumulus::bench::stream_output_ok(dst, bytes, inputs)) {
    state.SkipWithError("the streaming kernel's output is wrong");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes) * (inputs + 1));
  state.SetLabel(std::string(cumulus::bench::stream_isa_name(isa)) + ", " +
                 std::to_string(team.threads()) + " threads");
}

// A reduced kernel (reduced_scan.h) for AVX2 where CUMULUS_ISA=avx2 asks for it, else the widest
// this CPU has: its function and name; null, the benchmark skipped, where there is none.
template <class Choose>
auto reduced_kernel(benchmark::State& state, Choose choose) {
  const char* isa = std::getenv("CUMULUS_ISA");
  const auto chosen = choose(isa != nullptr && std::string_view(isa) == "avx2");
  if (!chosen.first) state.SkipWithError("no AVX2 or AVX-512 on this CPU");
  return chosen;
}

// A float32 long row as scan_split_row runs it from memory, with the pass reduced to its
// arithmetic (reduced_scan.h's memory variant: the widening prefix, the running sum, streamed
// outputs, asking ahead; no certificate, no rounding variants) and the total to a sum in double
// lanes: thread 0 scans the first segment; thread t > 0 totals segment t - 1 (read from memory
// while thread t - 1 scans it), takes the carry before it from thread t - 1, and scans segment t
// from their sum. `state.range(1)` is the total's share of a scan, in percent, as scan_split_row
// cuts; at 0 the segments are equal and their carries are found before timing, so no segment is
// read twice: the reduced pass from memory with nothing of the split's. Against Ceiling/copy_nt
// and `--case=CumSum:float32:67108864:0` in the same process, it separates what the split's second
// read costs from what the pass's arithmetic does. Its terms in [0.5, 1.5) sum exactly in double
// in any order, so its outputs must be cumsum's bits. Threads are started per run (tens of
// microseconds against milliseconds).
void split_scan_bench(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const double share = static_cast<double>(state.range(1)) / 100;
  const auto [kernels, name] = reduced_kernel(state, cumulus::bench::reduced_split);
  if (!kernels) return;
  const auto threads = static_cast<std::size_t>(cumulus::num_threads());
  const Tensor x = random_tensor(DType::kFloat32, {static_cast<int64_t>(n)});
  Tensor y(DType::kFloat32, {static_cast<int64_t>(n)});
  const float* xs = x.data<float>();
  float* ys = y.data<float>();
  const std::vector<std::size_t> cut = cumulus::detail::split_cuts(n, threads, share, 1 << 15);
  std::vector<double> known(threads, 0);  // share 0: each segment's carry, found untimed
  for (std::size_t t = 1; t < threads; ++t) {
    known[t] = known[t - 1] + kernels.total(xs + cut[t - 1], cut[t] - cut[t - 1]);
  }
  const auto run = [&] {
    std::vector<double> carry(threads, 0);
    std::vector<std::atomic<bool>> ready(threads);
    std::vector<std::thread> workers;
    for (std::size_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        double start = known[t];
        if (t > 0 && share > 0) {
          const double total = kernels.total(xs + cut[t - 1], cut[t] - cut[t - 1]);
          ready[t - 1].wait(false, std::memory_order_acquire);
          start = carry[t - 1] + total;
        }
        carry[t] = start;
        ready[t].store(true, std::memory_order_release);
        ready[t].notify_all();
        kernels.scan(xs + cut[t], ys + cut[t], cut[t + 1] - cut[t], start);
#if defined(__x86_64__)
        _mm_sfence();  // the streamed outputs land before the check reads them
#endif
      });
    }
    for (auto& w : workers) w.join();
  };
  run();  // untimed, so the output's pages are in before timing
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  const Tensor want = cumulus::cumsum(x, 0);
  if (std::memcmp(want.data<float>(), ys, n * sizeof(float)) != 0) {
    state.SkipWithError("the reduced split scan's outputs differ from cumsum's");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * n * sizeof(float)));
  state.SetLabel(std::string(name) + ", " + std::to_string(threads) + " threads");
}

void register_ceilings() {
  constexpr int64_t kMiB = int64_t{1} << 20;
  for (int64_t bytes : {16 * kMiB, 256 * kMiB}) {
    benchmark::RegisterBenchmark("Ceiling/copy_nt", ceiling_bench, 1, Pattern::kCeiling)
        ->Arg(bytes)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("Reduced/total_then_copy_nt", ceiling_bench, 1, Pattern::kTotalFirst)
      ->Arg(256 * kMiB)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  // Shares of 0 and of a float32 total's (scan_split_row's cut), 25%; [64M], the ceiling's 256 MiB.
  benchmark::RegisterBenchmark("Reduced/split_scan_f32_nt", split_scan_bench)
      ->Args({64 * kMiB, 0})
      ->Args({64 * kMiB, 25})
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  // The float32 column step alone (reduced_scan.h) along axis 0 of [4096,16384], a tile of 512
  // columns per chunk of the ceiling's team: beside Ceiling/copy_nt/268435456 (the same bytes) and
  // `--case=CumSum:float32:4096x16384:0 --case_threads=2`, what the step's arithmetic and its
  // strided traffic cost without the kernel around them. Its terms in [0.5, 1.5) sum exactly in
  // double, so its outputs must be cumsum's bits.
  benchmark::RegisterBenchmark(
      "Reduced/columns_f32_nt/4096x16384",
      [](benchmark::State& state) {
        constexpr std::size_t kLength = 4096, kInner = 16384;
        constexpr std::size_t kTile = cumulus::bench::kReducedColumnTile;
        const auto [step, name] = reduced_kernel(state, cumulus::bench::reduced_columns);
        if (step == nullptr) return;
        const Tensor x = random_tensor(DType::kFloat32, {kLength, kInner});
        Tensor y(DType::kFloat32, {kLength, kInner});
        cumulus::bench::StreamTeam team(cumulus::num_threads());
        std::atomic<bool> inexact{false};
        const auto run = [&] {  // one chunk of the team's counter per tile
          team.run(kInner / kTile * cumulus::bench::kStreamChunk,
                   [&](std::size_t begin, std::size_t) {
                     const std::size_t c0 = begin / cumulus::bench::kStreamChunk * kTile;
                     if (step(x.data<float>(), y.data<float>(), kLength, kInner, c0) != 0) {
                       inexact = true;
                     }
                   });
        };
        run();  // untimed, so the output's pages are in before timing
        for (auto _ : state) {
          run();
          benchmark::ClobberMemory();
        }
        const Tensor want = cumulus::cumsum(x, 0);
        if (inexact ||
            std::memcmp(want.data<float>(), y.data<float>(), y.size() * sizeof(float)) != 0) {
          state.SkipWithError("the reduced column step's outputs differ from cumsum's");
        }
        state.SetBytesProcessed(state.iterations() * 2 * y.size() *
                                static_cast<int64_t>(sizeof(float)));
        state.SetLabel(std::string(name) + ", " + std::to_string(team.threads()) + " threads");
      })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (int inputs : {2, 3, 8}) {
    for (int64_t bytes : {16 * kMiB, 64 * kMiB, 256 * kMiB}) {
      if ((inputs + 1) * bytes > 2 * kMaxBytesMoved) continue;
      benchmark::RegisterBenchmark(("Ceiling/sum_nt/x" + std::to_string(inputs)).c_str(),
                                   ceiling_bench, inputs, Pattern::kCeiling)
          ->Arg(bytes)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    // The Sums' own placement, against the row above of 64 MiB.
    benchmark::RegisterBenchmark(("Reduced/sum_nt_2mib_apart/x" + std::to_string(inputs)).c_str(),
                                 ceiling_bench, inputs, Pattern::kHugeAligned)
        ->Arg(64 * kMiB)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

struct Layout {
  const char* name;
  // Shape and axis for n elements; empty shape when n does not suit the layout.
  std::pair<Shape, int64_t> (*make)(int64_t n);
};
constexpr Layout kLayouts[] = {
    {"1d",
     [](int64_t n) {
       return std::pair{Shape{n}, int64_t{0}};
     }},
    {"last_axis",
     [](int64_t n) {
       return std::pair{Shape{n / 4096, 4096}, int64_t{1}};
     }},
    {"first_axis",
     [](int64_t n) {
       return std::pair{Shape{n / 4096, 4096}, int64_t{0}};
     }},
    {"middle_axis",
     [](int64_t n) {
       return std::pair{Shape{16, n / 1024, 64}, int64_t{1}};
     }},
    {"short_rows",
     [](int64_t n) {
       return std::pair{Shape{n / 8, 8}, int64_t{1}};
     }},
};

void register_scans() {
  for (const bool product : {false, true}) {
    for (DType dtype : cumulus::kAllDTypes) {
      for (const Layout& layout : kLayouts) {
        for (int64_t n : kSizes) {
          // Plain locals: clang before 16 cannot capture structured bindings in a lambda.
          const Shape shape = layout.make(n).first;
          const int64_t axis = layout.make(n).second;
          const auto bytes = n * static_cast<int64_t>(cumulus::dtype_size(dtype));
          if (shape.front() == 0 || 2 * bytes > kMaxBytesMoved) continue;
          const std::string name = std::string(product ? "CumProd/" : "CumSum/") +
                                   std::string(cumulus::dtype_name(dtype)) + "/" + layout.name +
                                   "/" + std::to_string(n);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& state) {
                                         const Tensor x = random_tensor(dtype, shape);
                                         Tensor y(dtype, shape);
                                         // Once untimed, so the output's pages are faulted in
                                         // before timing.
                                         product ? cumulus::cumprod(x, axis, y.view())
                                                 : cumulus::cumsum(x, axis, y.view());
                                         for (auto _ : state) {
                                           product ? cumulus::cumprod(x, axis, y.view())
                                                   : cumulus::cumsum(x, axis, y.view());
                                           benchmark::ClobberMemory();
                                         }
                                         state.SetBytesProcessed(state.iterations() * 2 * bytes);
                                       })
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
}

// One thread's compute rate: 16384 elements stay in L1/L2 and below the size at which a row is
// split between threads (and below Sum's parallel grain), so only the calling thread works.
// Reported in elements per second (ns per element = 1e9 / rate); against the rate memcpy allows
// per thread, it tells whether a large case can reach the memory bound on this CPU.
void register_compute() {
  constexpr int64_t kN = 16384;
  for (const bool product : {false, true}) {
    for (DType dtype : cumulus::kAllDTypes) {
      const std::string name = std::string(product ? "Compute/CumProd/" : "Compute/CumSum/") +
                               std::string(cumulus::dtype_name(dtype)) + "/" + std::to_string(kN);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
        const Tensor x = random_tensor(dtype, {kN});
        Tensor y(dtype, {kN});
        for (auto _ : state) {
          product ? cumulus::cumprod(x, 0, y.view()) : cumulus::cumsum(x, 0, y.view());
          benchmark::ClobberMemory();
        }
        state.SetItemsProcessed(state.iterations() * kN);
      });
    }
  }
  // A floating row's total alone (what a long row's look-back reads ahead of its scan), in the
  // same way: against Compute/CumSum and Compute/CumProd, the share of a scan it costs.
  for (const bool product : {false, true}) {
    for (DType dtype : cumulus::kAllDTypes) {
      if (!cumulus::is_floating(dtype)) continue;
      const std::string name =
          std::string(product ? "Compute/CumProdTotal/" : "Compute/CumSumTotal/") +
          std::string(cumulus::dtype_name(dtype)) + "/" + std::to_string(kN);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
        const Tensor x = random_tensor(dtype, {kN});
        const auto& table = cumulus::detail::kernels();
        const auto total = (product ? table.cumprod : table.cumsum)[static_cast<int>(dtype)].total;
        for (auto _ : state) {
          benchmark::DoNotOptimize(total(x.raw(), static_cast<std::size_t>(kN)));
        }
        state.SetItemsProcessed(state.iterations() * kN);
      });
    }
  }
  // bfloat16's worst case for the vector stores: 1, 256, then -256 and 256 in turn, every other
  // output 257, a tie, so every vector of outputs takes the way through round to odd.
  benchmark::RegisterBenchmark(
      ("Compute/CumSum/bfloat16_midpoints/" + std::to_string(kN)).c_str(),
      [](benchmark::State& state) {
        Tensor x(DType::kBFloat16, {kN});
        auto* p = x.data<cumulus::BFloat16>();
        for (int64_t i = 0; i < kN; ++i) {
          p[i] = cumulus::from_double<cumulus::BFloat16>(i == 0 ? 1.0 : i % 2 ? 256.0 : -256.0);
        }
        Tensor y(DType::kBFloat16, {kN});
        for (auto _ : state) {
          cumulus::cumsum(x, 0, y.view());
          benchmark::ClobberMemory();
        }
        state.SetItemsProcessed(state.iterations() * kN);
      });
  // The float32 scan's one pass alone (reduced_scan.h), beside Compute/CumSum/float32 on the same
  // terms: in [0.5, 1.5), 16384 of them, whose double prefixes are exact, so its outputs must be
  // the library's bits.
  benchmark::RegisterBenchmark(
      ("Reduced/scan_f32_arithmetic/" + std::to_string(kN)).c_str(), [](benchmark::State& state) {
        const Tensor x = random_tensor(DType::kFloat32, {kN});
        Tensor y(DType::kFloat32, {kN});
        const auto [scan, name] = reduced_kernel(state, cumulus::bench::reduced_scan);
        if (scan == nullptr) return;
        double sink = 0;
        for (auto _ : state) {
          sink += scan(x.data<float>(), y.data<float>(), kN);
          benchmark::ClobberMemory();
        }
        benchmark::DoNotOptimize(sink);
        const Tensor want = cumulus::cumsum(x, 0);
        if (std::memcmp(want.data<float>(), y.data<float>(), kN * sizeof(float)) != 0) {
          state.SkipWithError("the reduced scan's outputs differ from cumsum's");
        }
        state.SetItemsProcessed(state.iterations() * kN);
        state.SetLabel(std::string(name));
      });
  struct ComputeSum {
    DType dtype;
    const char* label;
    std::vector<Shape> shapes;
  };
  const ComputeSum sums[] = {
      {DType::kFloat32, "same_shape_x3", {Shape{4, 4096}, Shape{4, 4096}, Shape{4, 4096}}},
      {DType::kFloat32, "matrix_row_scalar", {Shape{4, 4096}, Shape{4096}, Shape{}}},
      {DType::kFloat32, "same_shape_x8", std::vector<Shape>(8, Shape{4, 4096})},
      {DType::kFloat16, "same_shape_x3", {Shape{4, 4096}, Shape{4, 4096}, Shape{4, 4096}}},
  };
  for (const ComputeSum& c : sums) {
    const std::string name = std::string("Compute/Sum/") +
                             std::string(cumulus::dtype_name(c.dtype)) + "/" + c.label + "/" +
                             std::to_string(kN);
    benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& state) {
      std::vector<Tensor> inputs;
      for (const Shape& s : c.shapes) inputs.push_back(random_tensor(c.dtype, s));
      const std::vector<cumulus::ConstTensorView> views(inputs.begin(), inputs.end());
      Tensor y(c.dtype, {4, 4096});
      for (auto _ : state) {
        cumulus::sum(views, y.view());
        benchmark::ClobberMemory();
      }
      state.SetItemsProcessed(state.iterations() * kN);
    });
  }
}

struct SumCase {
  const char* name;
  std::vector<Shape> (*shapes)(int64_t n);
};
constexpr SumCase kSumCases[] = {
    {"same_shape_x2",
     [](int64_t n) {
       return std::vector<Shape>(2, Shape{n / 4096, 4096});
     }},
    {"same_shape_x3",
     [](int64_t n) {
       return std::vector<Shape>(3, Shape{n / 4096, 4096});
     }},
    {"same_shape_x8",
     [](int64_t n) {
       return std::vector<Shape>(8, Shape{n / 4096, 4096});
     }},
    {"scalar",
     [](int64_t n) {
       return std::vector<Shape>{Shape{n / 4096, 4096}, Shape{}};
     }},
    {"row_broadcast",
     [](int64_t n) {
       return std::vector<Shape>{Shape{n / 4096, 4096}, Shape{4096}};
     }},
    {"column_broadcast",
     [](int64_t n) {
       return std::vector<Shape>{Shape{n / 4096, 4096}, Shape{n / 4096, 1}};
     }},
    {"matrix_row_scalar",
     [](int64_t n) {
       return std::vector<Shape>{Shape{n / 4096, 4096}, Shape{4096}, Shape{}};
     }},
};

void register_sums() {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (const SumCase& c : kSumCases) {
      for (int64_t n : kSizes) {
        if (n < 4096) continue;
        const std::vector<Shape> shapes = c.shapes(n);
        int64_t bytes = 0;
        for (const Shape& s : shapes) bytes += cumulus::element_count(s);
        bytes = (bytes + n) * static_cast<int64_t>(cumulus::dtype_size(dtype));
        if (bytes > 2 * kMaxBytesMoved) continue;
        const std::string name = std::string("Sum/") + std::string(cumulus::dtype_name(dtype)) +
                                 "/" + c.name + "/" + std::to_string(n);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [=](benchmark::State& state) {
                                       std::vector<Tensor> inputs;
                                       for (const Shape& s : shapes)
                                         inputs.push_back(random_tensor(dtype, s));
                                       const std::vector<cumulus::ConstTensorView> views(
                                           inputs.begin(), inputs.end());
                                       Tensor y(dtype, cumulus::sum_shape(views));
                                       cumulus::sum(views, y.view());
                                       for (auto _ : state) {
                                         cumulus::sum(views, y.view());
                                         benchmark::ClobberMemory();
                                       }
                                       state.SetBytesProcessed(state.iterations() * bytes);
                                     })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

// A workload given on the command line, for bench/compare.py --bounds: --case=OP:DTYPE:SHAPES:AXIS
// (OP CumSum, CumProd or Sum; DTYPE as dtype_name gives it; SHAPES the inputs' shapes joined by
// '+', each as 4x16384 or 'scalar'; AXIS for a scan), run on --case_threads=N threads (default
// 1: one core's rate), over inputs as `cumulus perf --input NAME=random:DIMS` makes them
// (random_input.h), or, for the floating types, as --case_values=normal (standard normal) or
// --case_values=unit (uniform [0, 1)) says: the exact kernels' certificates depend on the terms'
// exponents and signs. Reported in output elements per second.
using cumulus::cli::RandomValues;

struct Case {
  std::string text, op;
  DType dtype = DType::kFloat32;
  std::vector<Shape> shapes;
  int64_t axis = 0;
  RandomValues values = RandomValues::kRandom;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t end; (end = s.find(sep, start)) != std::string::npos; start = end + 1) {
    parts.push_back(s.substr(start, end - start));
  }
  parts.push_back(s.substr(start));
  return parts;
}

// Throws std::invalid_argument (std::stoll's, or its own) on a malformed case.
Case parse_case(const std::string& text) {
  const std::vector<std::string> parts = split(text, ':');
  if (parts.size() != 4 || (parts[0] != "CumSum" && parts[0] != "CumProd" && parts[0] != "Sum")) {
    throw std::invalid_argument("expected OP:DTYPE:SHAPES:AXIS with OP CumSum, CumProd or Sum");
  }
  Case c{text, parts[0], DType::kFloat32, {}, 0};
  const auto dtype = cumulus::dtype_from_name(parts[1]);
  if (!dtype) throw std::invalid_argument("unknown dtype '" + parts[1] + "'");
  c.dtype = *dtype;
  for (const std::string& s : split(parts[2], '+')) {
    const std::optional<Shape> shape = cumulus::cli::dims_from_text(s);
    if (!shape) throw std::invalid_argument("'" + s + "' is not a shape like 4x16384 or 'scalar'");
    c.shapes.push_back(*shape);
  }
  c.axis = std::stoll(parts[3]);
  if (c.op != "Sum" && c.shapes.size() != 1) throw std::invalid_argument("a scan takes one shape");
  return c;
}

// The integer types take random values whatever --case_values says.
Tensor case_tensor(DType dtype, Shape shape, RandomValues values, std::mt19937_64& rng) {
  Tensor t(dtype, std::move(shape));
  cumulus::cli::fill_random(
      t, rng, cumulus::cli::random_values_fit(values, dtype) ? values : RandomValues::kRandom);
  return t;
}

void register_case(const Case& c, int threads) {
  benchmark::RegisterBenchmark(("Case/" + c.text).c_str(), [c, threads](benchmark::State& state) {
    std::mt19937_64 rng(1);
    std::vector<Tensor> inputs;
    for (const Shape& s : c.shapes) inputs.push_back(case_tensor(c.dtype, s, c.values, rng));
    const std::vector<cumulus::ConstTensorView> views(inputs.begin(), inputs.end());
    Tensor y(c.dtype, c.op == "Sum" ? cumulus::sum_shape(views) : c.shapes[0]);
    const auto run = [&] {
      if (c.op == "Sum") {
        cumulus::sum(views, y.view());
      } else if (c.op == "CumProd") {
        cumulus::cumprod(views[0], c.axis, y.view());
      } else {
        cumulus::cumsum(views[0], c.axis, y.view());
      }
    };
    const int before = cumulus::num_threads();
    cumulus::set_num_threads(threads);
    try {
      run();  // untimed, so the output's pages are in before timing
    } catch (const std::exception& e) {
      cumulus::set_num_threads(before);
      state.SkipWithError(e.what());
      return;
    }
    for (auto _ : state) {
      run();
      benchmark::ClobberMemory();
    }
    cumulus::set_num_threads(before);
    state.SetItemsProcessed(state.iterations() * y.size());
    state.SetLabel(std::to_string(threads) + " threads");
  })->UseRealTime();
}

// Takes --case=... and --case_threads=N out of argv (before Google Benchmark sees it) and registers
// the cases; false (after a message) on a malformed one.
bool register_cases(int& argc, char** argv) {
  std::vector<std::string> texts;
  int threads = 1;
  RandomValues values = RandomValues::kRandom;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--case=")) {
      texts.emplace_back(arg.substr(7));
    } else if (arg.starts_with("--case_threads=")) {
      threads = std::atoi(argv[i] + 15);
      if (threads < 1) {
        std::fprintf(stderr, "bench_kernels: --case_threads must be a positive count\n");
        return false;
      }
    } else if (arg.starts_with("--case_values=")) {
      const std::optional<RandomValues> v = cumulus::cli::random_values_from_text(arg.substr(14));
      if (!v) {
        std::fprintf(stderr, "bench_kernels: --case_values must be random, normal or unit\n");
        return false;
      }
      values = *v;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  for (const std::string& text : texts) {
    try {
      Case c = parse_case(text);
      c.values = values;
      register_case(c, threads);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_kernels: --case=%s: %s\n", text.c_str(), e.what());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  for (int64_t bytes :
       {int64_t{4} << 10, int64_t{1} << 20, int64_t{16} << 20, int64_t{256} << 20}) {
    benchmark::RegisterBenchmark(("memcpy/" + std::to_string(bytes)).c_str(), memcpy_bench)
        ->Arg(bytes)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (int64_t bytes : {int64_t{16} << 20, int64_t{256} << 20}) {
    benchmark::RegisterBenchmark(("memcpy_threads/" + std::to_string(bytes)).c_str(),
                                 memcpy_threads_bench)
        ->Arg(bytes)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  register_ceilings();
  register_scans();
  register_sums();
  register_compute();
  if (!register_cases(argc, argv)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cumulus_isa", std::string(cumulus::kernel_isa()));
  benchmark::AddCustomContext("cumulus_threads", std::to_string(cumulus::num_threads()));
  benchmark::AddCustomContext(
      "ceiling_isa",
      std::string(cumulus::bench::stream_isa_name(cumulus::bench::best_stream_isa())));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
