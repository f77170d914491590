// The ceilings compare.py reports next to each workload, timed in their own process on buffers
// sized like the workload's: the streaming kernel (a non-temporal copy of a scan's input, or the
// K-input streaming add of a Sum's full-size inputs; the fastest of the widths streaming.h tries)
// and a memcpy of half the bytes the workload moves, each with 1 thread and with THREADS threads.
// Prints one JSON line: {"isa" (the fastest width's), "stream": {"1": {"median_ms", "min_ms",
// "iterations", "isa"}, "THREADS": ...}, "memcpy": ...}.
// Build: c++ -O2 -std=c++20 -pthread -o stream_timer stream_timer.cc (compare.py does it).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "streaming.h"

namespace {

using cumulus::bench::StreamTeam;

constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

struct Timing {
  double median_ms, min_ms;
  int iterations;
};

template <class Body>
Timing time_runs(int iterations, int warmup, const Body& body) {
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) ms.push_back(cumulus::bench::time_ms(body));
  return {cumulus::bench::median(ms), *std::min_element(ms.begin(), ms.end()), iterations};
}

// `"threads": {...}`, a member of the JSON object of one kernel's timings; `isa` the streaming
// width's name, or empty.
std::string json_entry(int threads, const Timing& t, std::string_view isa = {}) {
  char text[200];
  std::snprintf(text, sizeof text,
                "\"%d\": {\"median_ms\": %.6f, \"min_ms\": %.6f, \"iterations\": %d%s%.*s%s}",
                threads, t.median_ms, t.min_ms, t.iterations, isa.empty() ? "" : ", \"isa\": \"",
                static_cast<int>(isa.size()), isa.data(), isa.empty() ? "" : "\"");
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: stream_timer BYTES INPUTS THREADS ITERATIONS WARMUP\n");
    return 2;
  }
  const std::size_t bytes = std::strtoull(argv[1], nullptr, 10);
  const int inputs = std::atoi(argv[2]), threads = std::atoi(argv[3]);
  const int iterations = std::atoi(argv[4]), warmup = std::atoi(argv[5]);
  if (inputs < 1 || threads < 1 || iterations < 1 || warmup < 0) {
    std::fprintf(stderr, "stream_timer: INPUTS, THREADS and ITERATIONS must be positive\n");
    return 2;
  }
  // One region holds the inputs and the output; the memcpy copies its first half onto its
  // second, at the same stagger.
  const std::size_t stride = cumulus::bench::stream_stride(bytes);
  const cumulus::bench::StreamRegion region(
      round_up(stride * static_cast<std::size_t>(inputs + 1), kPage) + 2 * kPage);
  char* const base = region.data();
  if (base == nullptr) {
    std::fprintf(stderr, "stream_timer: cannot allocate %zu bytes\n", region.size());
    return 1;
  }
  std::vector<const char*> src;
  for (int j = 0; j < inputs; ++j) src.push_back(base + stride * static_cast<std::size_t>(j));
  char* dst = base + stride * static_cast<std::size_t>(inputs);
  const std::size_t half = bytes * static_cast<std::size_t>(inputs + 1) / 2;
  char* copy_dst = base + round_up(half, kPage) + (stride - round_up(bytes, kPage));

  std::string stream_json, memcpy_json;
  std::string_view fastest_isa;
  double fastest_ms = 0;
  std::vector<int> thread_counts{1};
  if (threads > 1) thread_counts.push_back(threads);
  for (const int t : thread_counts) {
    StreamTeam team(t);
    Timing stream{};
    std::string_view stream_isa;
    for (const auto isa : cumulus::bench::stream_isas()) {
      std::memset(dst, 0, bytes);  // so that the check below sees the kernel's work
      const Timing timing = time_runs(iterations, warmup, [&] {
        team.run(bytes, [&](std::size_t begin, std::size_t end) {
          cumulus::bench::stream_add(isa, dst, src.data(), inputs, begin, end);
        });
      });
      if (!cumulus::bench::stream_output_ok(dst, bytes, inputs)) {
        std::fprintf(stderr, "stream_timer: the streaming kernel's output is wrong\n");
        return 1;
      }
      if (stream_isa.empty() || timing.median_ms < stream.median_ms) {
        stream = timing;
        stream_isa = cumulus::bench::stream_isa_name(isa);
      }
    }
    if (fastest_isa.empty() || stream.median_ms < fastest_ms) {
      fastest_ms = stream.median_ms;
      fastest_isa = stream_isa;
    }
    const Timing copy = time_runs(iterations, warmup, [&] {
      team.run(half, [&](std::size_t begin, std::size_t end) {
        std::memcpy(copy_dst + begin, base + begin, end - begin);
      });
    });
    if (t > 1) {
      stream_json += ", ";
      memcpy_json += ", ";
    }
    stream_json += json_entry(t, stream, stream_isa);
    memcpy_json += json_entry(t, copy);
  }
  std::printf(
      "{\"isa\": \"%s\", \"bytes\": %zu, \"inputs\": %d, \"stream\": {%s}, \"memcpy\": {%s}}\n",
      std::string(fastest_isa).c_str(), bytes, inputs, stream_json.c_str(), memcpy_json.c_str());
  return 0;
}
