// Google Benchmark over the kernel API: every operator x dtype x layout, from in-cache sizes to
// 512 MB moved, reported in bytes per second (input plus output) next to a memcpy of the same
// bytes and the streaming ceilings (Ceiling/...) in the same process.
// Run: build/bench/bench_kernels [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cumulus/ops.h"
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

// The streaming ceilings (streaming.h): `inputs` buffers of `bytes` each, added into one more with
// non-temporal stores (one input: a copy, the ceiling of a scan of `bytes`; K: of a Sum of K
// same-shape inputs), on the kernels' thread count, chunks taken from a shared counter.
void ceiling_bench(benchmark::State& state, int inputs) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto isa = cumulus::bench::best_stream_isa();
  constexpr std::size_t kPage = 4096;
  const std::size_t stride = cumulus::bench::stream_stride(bytes);
  // aligned_alloc takes whole multiples of the alignment.
  const std::size_t region =
      (stride * static_cast<std::size_t>(inputs + 1) + kPage - 1) / kPage * kPage;
  const std::unique_ptr<char, decltype(&std::free)> base(
      static_cast<char*>(std::aligned_alloc(kPage, region)), &std::free);
  if (!base) {
    state.SkipWithError("cannot allocate the buffers");
    return;
  }
  std::memset(base.get(), 1, region);
  std::vector<const char*> src;
  for (int j = 0; j < inputs; ++j) src.push_back(base.get() + stride * static_cast<std::size_t>(j));
  char* dst = base.get() + stride * static_cast<std::size_t>(inputs);
  std::memset(dst, 0, bytes);  // so that the check after the runs sees the kernel's work
  cumulus::bench::StreamTeam team(cumulus::num_threads());
  for (auto _ : state) {
    team.run(bytes, [&](std::size_t begin, std::size_t end) {
      cumulus::bench::stream_add(isa, dst, src.data(), inputs, begin, end);
    });
    benchmark::ClobberMemory();
  }
  if (!cumulus::bench::stream_output_ok(dst, bytes, inputs)) {
    state.SkipWithError("the streaming kernel's output is wrong");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes) * (inputs + 1));
  state.SetLabel(std::string(cumulus::bench::stream_isa_name(isa)) + ", " +
                 std::to_string(team.threads()) + " threads");
}

void register_ceilings() {
  constexpr int64_t kMiB = int64_t{1} << 20;
  for (int64_t bytes : {16 * kMiB, 256 * kMiB}) {
    benchmark::RegisterBenchmark("Ceiling/copy_nt", ceiling_bench, 1)
        ->Arg(bytes)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (int inputs : {2, 3, 8}) {
    for (int64_t bytes : {16 * kMiB, 64 * kMiB, 256 * kMiB}) {
      if ((inputs + 1) * bytes > 2 * kMaxBytesMoved) continue;
      benchmark::RegisterBenchmark(("Ceiling/sum_nt/x" + std::to_string(inputs)).c_str(),
                                   ceiling_bench, inputs)
          ->Arg(bytes)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
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
