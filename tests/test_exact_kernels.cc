// The numerical promise of the floating kernels, held bit for bit. CumSum's every output and Sum's
// every element is the exact sum of its terms rounded once to the element type (exact.h's
// exact::Sum, any NaN for a NaN); CumProd's is within 1 ulp of the exact product
// (product_reference.h) and bit-identical everywhere; integers wrap, the same everywhere. Each
// case runs on every kernel table this process may use (scalar, and AVX2 and AVX-512 where the CPU
// has them and CUMULUS_ISA does not cap them: on this project's AVX-512 machine all three in the
// default run, one or two in the *_isa_scalar / *_isa_avx2 reruns), at the default thresholds and
// at thresholds shrunk (detail::set_tuning) so these inputs take long rows cut into pieces over
// several rounds, column and Sum row tiles and streamed stores, on 1, 2, 3 and 8 threads.
//
// The data is adversarial for any accumulator of finite width: cancellation across the whole
// exponent range, ties decided far below the last place, wide dynamic range, prefixes that leave
// the type's range and come back, long scans, special values; and data on which any accumulator
// at least as wide as double is exact (small integers, dyadic values, zeros), where every
// implementation must agree.
#include <cpuid.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cumulus/ops.h"
#include "exact.h"
#include "exact_types.h"
#include "ops/tuning.h"
#include "product_reference.h"
#include "reference.h"

namespace {

using cumulus::BFloat16;
using cumulus::ConstTensorView;
using cumulus::Float16;
using cumulus::ScanOptions;
using cumulus::Tensor;
using cumulus::TensorView;
using cumulus::detail::KernelTable;
using cumulus::detail::Tuning;
using Shape = std::vector<int64_t>;
using Rng = std::mt19937_64;

// ---- Where the kernels run ----------------------------------------------------------------------

// The tables this process may run: scalar always; AVX2, AVX-512 and AVX512-FP16 when the CPU has
// what dispatch.cc asks of them and the process's own table (capped by CUMULUS_ISA) is not lower.
std::vector<const KernelTable*> tables() {
  __builtin_cpu_init();
  const std::string own = cumulus::detail::kernels().isa;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  const bool fp16 = avx512 && exact_test::cpu_has_avx512fp16();
  std::vector<const KernelTable*> t{&cumulus::detail::scalar_kernels()};
  if (avx2 && own != "scalar") t.push_back(&cumulus::detail::avx2_kernels());
  if (avx512 && own.starts_with("avx512")) t.push_back(&cumulus::detail::avx512_kernels());
  if (fp16 && own == "avx512fp16") t.push_back(&cumulus::detail::avx512fp16_kernels());
  return t;
}

struct Run {
  Tuning tuning;
  int threads;
  std::string name;
};

// Every table on one thread at the default thresholds and at two shrunk sets: "small" cuts rows of
// 64 or more into pieces of 37, three a round, "tiny" rows of 2 or more into pieces of 5, four a
// round, with one-column tiles. Then the process's own table on 2, 3 and 8 threads (small and
// tiny on 3, small on 8): each parallel job waits for every thread to take it, and a two-core
// machine makes that slow. Rows of 10^4 and more take "long" instead of small and tiny: pieces of
// 4099, three a round, so they still run in several rounds but in few jobs. Grouped by thread
// count, so the pool is resized four times, not once a run.
std::vector<Run> runs(bool long_rows = false) {
  std::vector<Run> all;
  const std::vector<const KernelTable*> available = tables();
  for (const int threads : {1, 2, 3, 8}) {
    for (const KernelTable* table : available) {
      if (threads != 1 && table != available.back()) continue;
      Tuning base;
      base.table = table;
      Tuning small = base;
      small.long_row = 64;
      small.piece = 37;
      small.pieces_per_round = 3;
      small.column_tile = 7;
      small.sum_row_tile = 11;
      small.min_chunk_elements = 1;
      small.stream_bytes = 0;
      small.stream_every_row = true;
      Tuning tiny = small;
      tiny.long_row = 2;
      tiny.piece = 5;
      tiny.pieces_per_round = 4;
      tiny.column_tile = 1;
      tiny.sum_row_tile = 3;
      Tuning long_set = small;
      long_set.piece = 4099;
      const std::pair<Tuning, std::string_view> tunings[] = {
          {base, "default"},
          {long_rows ? long_set : small, long_rows ? "long" : "small"},
          {tiny, "tiny"}};
      for (const auto& [tuning, name] : tunings) {
        if (long_rows && name == "tiny") continue;
        if (threads == 2 && name == "tiny") continue;
        if (threads == 3 && name == "default") continue;
        if (threads == 8 && name != "small" && name != "long") continue;
        all.push_back({tuning, threads,
                       std::string(table->isa) + " " + std::string(name) + " " +
                           std::to_string(threads) + (threads == 1 ? " thread" : " threads")});
      }
    }
  }
  return all;
}

// Applies a run's thresholds for one scope, and restores the defaults after. Its thread count
// stays until a run asks for another (a pool resize is slow): every run here sets its own.
class Scoped {
 public:
  explicit Scoped(const Run& r) {
    cumulus::detail::set_tuning(r.tuning);
    if (cumulus::num_threads() != r.threads) cumulus::set_num_threads(r.threads);
  }
  ~Scoped() { cumulus::detail::set_tuning({}); }
  Scoped(const Scoped&) = delete;
  Scoped& operator=(const Scoped&) = delete;
};

// ---- The element types --------------------------------------------------------------------------

template <class T>
struct Fmt;
template <>
struct Fmt<Float16> {
  static constexpr exact::Format kFormat = exact::kBinary16;
};
template <>
struct Fmt<BFloat16> {
  static constexpr exact::Format kFormat = exact::kBFloat16;
};
template <>
struct Fmt<float> {
  static constexpr exact::Format kFormat = exact::kBinary32;
};
template <>
struct Fmt<double> {
  static constexpr exact::Format kFormat = exact::kBinary64;
};

template <class T>
double value_of(T x) {
  return ref::Num<T>::to_double(x);
}
// d must be a value of T; checked, so a generator cannot silently feed rounded data.
template <class T>
T make(double d) {
  const T t = ref::Num<T>::from_double_rounded(d);
  EXPECT_TRUE(std::isnan(d) || value_of(t) == d) << ref::double_string(d) << " is not a value";
  return t;
}
template <class T>
T from_bits(uint64_t b) {
  T t;
  std::memcpy(&t, &b, sizeof(T));
  return t;
}
template <class T>
uint64_t to_bits(T t) {
  return static_cast<uint64_t>(ref::bits_of(t));
}

template <class T>
std::string type_name() {
  return std::string(cumulus::dtype_name(cumulus::dtype_of<T>));
}

// ---- Data
// -----------------------------------------------------------------------------------------

// A value m 2^e of T with a random significand m in [1, 2), its sign random; e within T's
// normal range.
template <class T>
double normal_value(Rng& rng, int e) {
  constexpr exact::Format f = Fmt<T>::kFormat;
  e = std::clamp(e, f.emin, f.emax);
  const double m =
      1 + std::ldexp(static_cast<double>(rng() >> (65 - f.precision)), 1 - f.precision);
  return (rng() % 2 != 0 ? -1 : 1) * std::ldexp(m, e);
}
template <class T>
double subnormal_value(Rng& rng) {
  constexpr exact::Format f = Fmt<T>::kFormat;
  const uint64_t k = 1 + rng() % ((uint64_t{1} << (f.precision - 1)) - 1);
  const double v = std::ldexp(static_cast<double>(k), f.emin - f.precision + 1);
  return rng() % 2 != 0 ? -v : v;
}
template <class T>
int random_exponent(Rng& rng) {
  constexpr exact::Format f = Fmt<T>::kFormat;
  return f.emin + static_cast<int>(rng() % static_cast<uint64_t>(f.emax - f.emin + 1));
}
// The unit in the last place of T at |v| (v a normal value of T).
template <class T>
double ulp_at(double v) {
  int e = 0;
  std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - 1, Fmt<T>::kFormat.emin) - Fmt<T>::kFormat.precision + 1);
}
// The smallest positive value of T.
template <class T>
double smallest() {
  return std::ldexp(1.0, Fmt<T>::kFormat.emin - Fmt<T>::kFormat.precision + 1);
}
// The largest finite value of T.
template <class T>
double largest() {
  constexpr exact::Format f = Fmt<T>::kFormat;
  return std::ldexp(2 - std::ldexp(1.0, 1 - f.precision), f.emax);
}

enum class Kind {
  kCancellation,  // B, s, -B, ...: huge terms cancel, leaving small ones, at every scale
  kTies,          // x, half an ulp of x, +-tiny, and back: ties decided far below the last place
  kWideRange,     // the top and bottom of the type's range and subnormals, mixed
  kOverflowBack,  // prefixes beyond the largest finite value that come back into range
  kNormal,        // Gaussian
  kIntegers,      // small integers: exact in any accumulator as wide as double
  kDyadic,        // multiples of 1/16 below 16: exact in any accumulator as wide as double
  kZeros,         // mostly +-0, runs of -0, some small integers: exact likewise
  kSpecials,      // small integers with +-Inf, NaN and -0 placed among them: exact likewise
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kCancellation:
      return "cancellation";
    case Kind::kTies:
      return "ties";
    case Kind::kWideRange:
      return "wide range";
    case Kind::kOverflowBack:
      return "overflow and back";
    case Kind::kNormal:
      return "normal";
    case Kind::kIntegers:
      return "integers";
    case Kind::kDyadic:
      return "dyadic";
    case Kind::kZeros:
      return "zeros";
    case Kind::kSpecials:
      break;
  }
  return "specials";
}

// n values of T of the given kind, in scan order.
template <class T>
std::vector<T> sequence(Kind kind, Rng& rng, std::size_t n) {
  constexpr exact::Format f = Fmt<T>::kFormat;
  std::vector<double> v;
  v.reserve(n + 8);
  int scale = f.emax;  // cancellation and ties walk down the whole range, then start again
  const auto next_scale = [&](int step) {
    scale -= step;
    if (scale < f.emin) scale = f.emax - static_cast<int>(rng() % 3);
    return scale;
  };
  while (v.size() < n) {
    switch (kind) {
      case Kind::kCancellation: {
        const double big = normal_value<T>(rng, next_scale(1 + static_cast<int>(rng() % 5)));
        const int below = 1 + static_cast<int>(rng() % static_cast<uint64_t>(f.emax - f.emin));
        const double small =
            rng() % 8 == 0 ? subnormal_value<T>(rng) : normal_value<T>(rng, scale - below);
        const uint64_t shape = rng() % 4;
        if (shape == 0) {  // B, s, -B
          v.insert(v.end(), {big, small, -big});
        } else if (shape == 1) {  // s, B, -B: the small term first
          v.insert(v.end(), {small, big, -big});
        } else if (shape == 2) {  // B, s, -B', with B' a neighbour of B: partial cancellation
          const double near = std::fabs(big) - ulp_at<T>(big) * static_cast<double>(1 + rng() % 3);
          v.insert(v.end(), {big, small, std::copysign(near, -big)});
        } else {  // B, s1, s2, -B
          const double small2 = normal_value<T>(rng, scale - 1 - static_cast<int>(rng() % 20));
          v.insert(v.end(), {big, small, small2, -big});
        }
        break;
      }
      case Kind::kTies: {
        // x + h is a tie between two neighbours of T; the tiny term t, far below, decides it
        // (t relative 2^-60 or so, or the smallest value of T: for float64 the bottom of the
        // double range). Then the terms are taken back out, so every later prefix is small again.
        const int e = next_scale(1 + static_cast<int>(rng() % 7));
        double x = normal_value<T>(rng, std::min(e, f.emax - 1));
        const double h = ulp_at<T>(x) / 2;
        if (h < smallest<T>()) break;
        const uint64_t pick = rng() % 3;
        double t = pick == 0 ? smallest<T>()
                             : std::max(smallest<T>(),
                                        std::ldexp(h, -(54 + static_cast<int>(rng() % 16))));
        if (pick == 2) t = std::max(smallest<T>(), std::ldexp(h, -60));
        if (rng() % 2 != 0) t = -t;
        const double sh = std::copysign(h, x);
        if (rng() % 2 != 0) {
          v.insert(v.end(), {x, sh, t, -x, -sh, -t});
        } else {  // the tiny term first
          v.insert(v.end(), {t, x, sh, -sh, -t, -x});
        }
        break;
      }
      case Kind::kWideRange: {
        const uint64_t r = rng() % 4;
        if (r == 0) {
          v.push_back(normal_value<T>(rng, f.emax - static_cast<int>(rng() % 8)));
        } else if (r == 1) {
          v.push_back(normal_value<T>(rng, f.emin + static_cast<int>(rng() % 8)));
        } else if (r == 2) {
          v.push_back(subnormal_value<T>(rng));
        } else {
          v.push_back(normal_value<T>(rng, random_exponent<T>(rng)));
        }
        // Now and then the top value taken back out, so the small ones show again.
        if (r == 0 && rng() % 2 == 0) v.push_back(-v.back());
        break;
      }
      case Kind::kOverflowBack: {
        // k near-largest terms of one sign then k of the other (float16 60000, 60000, -60000,
        // -60000; float64 1.7e308 twice, then back), small terms between.
        const int k = 1 + static_cast<int>(rng() % 4);
        const double big = std::fabs(normal_value<T>(rng, f.emax));
        const double sign = rng() % 2 != 0 ? -1 : 1;
        for (int i = 0; i < k; ++i) v.push_back(sign * big);
        if (rng() % 2 != 0) v.push_back(normal_value<T>(rng, random_exponent<T>(rng)));
        for (int i = 0; i < k; ++i) v.push_back(-sign * big);
        break;
      }
      case Kind::kNormal: {
        std::normal_distribution<double> g(0, 1);
        const double x = g(rng) * std::ldexp(1.0, std::min(f.emax - 8, 10));
        v.push_back(value_of(ref::Num<T>::from_double_rounded(x)));
        break;
      }
      case Kind::kIntegers:
        v.push_back(static_cast<double>(static_cast<int>(rng() % 41) - 20));
        break;
      case Kind::kDyadic:
        v.push_back(static_cast<double>(static_cast<int>(rng() % 511) - 255) / 16);  // 8 bits
        break;
      case Kind::kZeros: {
        const uint64_t r = rng() % 8;
        if (r < 3) {
          v.push_back(0.0);
        } else if (r < 6) {
          const std::size_t run = 1 + rng() % 6;
          for (std::size_t i = 0; i < run; ++i) v.push_back(-0.0);
        } else {
          v.push_back(static_cast<double>(static_cast<int>(rng() % 9) - 4));
        }
        break;
      }
      case Kind::kSpecials: {
        const uint64_t r = rng() % 40;
        const double inf = HUGE_VAL;
        v.push_back(r == 0   ? inf
                    : r == 1 ? -inf
                    : r == 2 ? std::nan("")
                    : r < 6  ? -0.0
                             : static_cast<double>(static_cast<int>(rng() % 9) - 4));
        break;
      }
    }
  }
  v.resize(n);
  std::vector<T> out;
  out.reserve(n);
  for (double d : v) out.push_back(make<T>(d));
  return out;
}

// Lays `seq` out along `axis` of `shape`: line after line (in the order the reference walks
// them), each line in scan order, so every line sees the sequence's pattern as it scans.
template <class T>
std::vector<T> along(const std::vector<T>& seq, const Shape& shape, int64_t axis, bool reverse) {
  std::vector<T> x(seq.size());
  EXPECT_EQ(static_cast<int64_t>(seq.size()), ref::count_of(shape));
  std::size_t next = 0;
  ref::walk_scan(
      shape, axis, false, reverse, 0, [](int s, int64_t) { return s; },
      [&](int64_t flat, int) { x[static_cast<std::size_t>(flat)] = seq[next++]; });
  return x;
}

// ---- Checking
// -------------------------------------------------------------------------------------

// Counts the elements that miss; one failure names how many and shows the first few.
class Misses {
 public:
  void add(std::size_t i, const std::string& message) {
    if (count_++ < 3) shown_ += "\n  element " + std::to_string(i) + ": " + message;
  }
  bool any() const { return count_ != 0; }
  void report(const std::string& what) const {
    EXPECT_EQ(count_, 0u) << what << ": " << count_ << " elements miss" << shown_;
  }

 private:
  std::size_t count_ = 0;
  std::string shown_;
};

template <class T>
std::string describe(T x) {
  char text[64];
  std::snprintf(text, sizeof text, "%a (bits %#llx)", value_of(x),
                static_cast<unsigned long long>(to_bits(x)));
  return text;
}

// got is the exactly rounded value `want` (as T's bits); a NaN matches any NaN.
template <class T>
void expect_bits(Misses& m, std::size_t i, T got, uint64_t want_bits) {
  const T want = from_bits<T>(want_bits);
  if (ref::same_value(got, want)) return;
  m.add(i, "got " + describe(got) + ", want " + describe(want));
}

// The exact scan along `axis`, each output rounded once to T's format.
template <class T>
std::vector<uint64_t> exact_cumsum(const std::vector<T>& x, const Shape& shape, int64_t axis,
                                   ScanOptions o) {
  std::vector<uint64_t> want(x.size());
  ref::walk_scan(
      shape, axis, o.exclusive, o.reverse, exact::Sum{},
      [&](exact::Sum s, int64_t i) {
        s.add(value_of(x[static_cast<std::size_t>(i)]));
        return s;
      },
      [&](int64_t i, const exact::Sum& s) {
        want[static_cast<std::size_t>(i)] = s.round_bits(Fmt<T>::kFormat);
      });
  return want;
}

template <class T>
std::vector<T> run_scan(bool product, const std::vector<T>& x, const Shape& shape, int64_t axis,
                        ScanOptions o) {
  const ConstTensorView xv(cumulus::dtype_of<T>, shape, x.data());
  std::vector<T> y(x.size());
  const TensorView yv{cumulus::dtype_of<T>, shape, y.data()};
  product ? cumulus::cumprod(xv, axis, yv, o) : cumulus::cumsum(xv, axis, yv, o);
  return y;
}

std::string options_text(const Shape& shape, int64_t axis, ScanOptions o) {
  return cumulus::shape_string(shape) + " axis " + std::to_string(axis) +
         (o.exclusive ? " exclusive" : "") + (o.reverse ? " reverse" : "");
}

constexpr ScanOptions kAllOptions[] = {{false, false}, {true, false}, {false, true}, {true, true}};

// Every output of CumSum, on every run, is the exact prefix sum rounded once.
template <class T>
void expect_cumsum_exact(const std::vector<T>& x, const Shape& shape, int64_t axis, ScanOptions o,
                         const std::string& what) {
  const std::vector<uint64_t> want = exact_cumsum(x, shape, axis, o);
  for (const Run& r : runs(shape[static_cast<std::size_t>(axis)] >= 10000)) {
    Scoped scoped(r);
    const std::vector<T> got = run_scan(false, x, shape, axis, o);
    Misses m;
    for (std::size_t i = 0; i < x.size(); ++i) expect_bits(m, i, got[i], want[i]);
    m.report("CumSum " + type_name<T>() + " " + what + " " + options_text(shape, axis, o) + " (" +
             r.name + ")");
    if (m.any()) return;  // one run's report says it; the others would repeat it
  }
}

// [150, 3, 4], [3, 150, 4] or [1, 2, 150]: the long-row path scans one row at a time, in jobs
// of its own, so few of them.
Shape long_on(int64_t axis) {
  if (axis == 2) return {1, 2, 150};
  Shape shape{3, 4};
  shape.insert(shape.begin() + axis, 150);
  return shape;
}
std::size_t count(const Shape& shape) { return static_cast<std::size_t>(ref::count_of(shape)); }

// Rank-3 tensors with the long dimension on each axis in turn, so the scan takes the long-row
// path (axis 2) and the column-tile paths (axes 0 and 1), with every option.
template <class T>
void expect_cumsum_exact_rank3(Kind kind, uint64_t seed) {
  for (int64_t axis = 0; axis < 3; ++axis) {
    const Shape shape = long_on(axis);
    for (const ScanOptions o : kAllOptions) {
      Rng rng(seed + static_cast<uint64_t>(axis));
      const std::vector<T> seq = sequence<T>(kind, rng, count(shape));
      expect_cumsum_exact(along(seq, shape, axis, o.reverse), shape, axis, o, kind_name(kind));
    }
  }
}

// ---- Sum
// ------------------------------------------------------------------------------------------

// Up to five inputs broadcasting to [4, 5, 37]: inputs 0 and 2 of the full shape, the others
// broadcast along different axes.
const std::vector<Shape> kSumShapes{{4, 5, 37}, {5, 1}, {4, 5, 37}, {37}, {4, 1, 1}};
// Ties: x and its half ulp in inputs 0 and 1.
const std::vector<Shape> kTieShapes{{4, 5, 37}, {4, 5, 37}, {5, 1}, {37}, {4, 1, 1}};
const std::vector<Shape>& sum_shapes(Kind kind) {
  return kind == Kind::kTies ? kTieShapes : kSumShapes;
}

template <class T>
std::vector<uint64_t> exact_sum(const std::vector<std::vector<T>>& in,
                                const std::vector<Shape>& shapes, const Shape& out) {
  std::vector<uint64_t> want;
  Shape index(out.size(), 0);
  do {
    exact::Sum s;
    for (std::size_t k = 0; k < in.size(); ++k) {
      const Shape& shape = shapes[k];
      const Shape strides = ref::row_major_strides(shape);
      const std::size_t pad = out.size() - shape.size();
      int64_t offset = 0;
      for (std::size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] != 1) offset += index[pad + d] * strides[d];
      }
      s.add(value_of(in[k][static_cast<std::size_t>(offset)]));
    }
    want.push_back(s.round_bits(Fmt<T>::kFormat));
  } while (ref::next_index(index, out, -1));
  return want;
}

template <class T>
void expect_sum_exact(const std::vector<std::vector<T>>& in, const std::vector<Shape>& shapes,
                      const std::string& what) {
  const Shape out = *ref::broadcast_shapes(shapes);
  const std::vector<uint64_t> want = exact_sum(in, shapes, out);
  std::vector<ConstTensorView> views;
  for (std::size_t k = 0; k < in.size(); ++k) {
    views.emplace_back(cumulus::dtype_of<T>, shapes[k], in[k].data());
  }
  for (const Run& r : runs()) {
    Scoped scoped(r);
    std::vector<T> got(want.size());
    cumulus::sum(views, TensorView{cumulus::dtype_of<T>, out, got.data()});
    Misses m;
    for (std::size_t i = 0; i < got.size(); ++i) expect_bits(m, i, got[i], want[i]);
    m.report("Sum of " + std::to_string(in.size()) + " " + type_name<T>() + " inputs, " + what +
             " (" + r.name + ")");
    if (m.any()) return;
  }
}

template <class T>
std::vector<T> fill(std::size_t n, const std::function<double()>& value) {
  std::vector<T> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(make<T>(value()));
  return v;
}

// The inputs of a Sum of `kind`, for 2 to 5 of them. Where the kind needs terms that cancel or
// decide a tie, they sit in inputs of the full shape or in inputs whose value is one per
// broadcast line.
template <class T>
std::vector<std::vector<T>> sum_inputs(Kind kind, Rng& rng) {
  constexpr exact::Format f = Fmt<T>::kFormat;
  std::vector<std::vector<T>> in(kSumShapes.size());
  const auto count = [&](std::size_t k) {
    return static_cast<std::size_t>(ref::count_of(kSumShapes[k]));  // before a Ties swap
  };
  switch (kind) {
    case Kind::kCancellation: {
      // B + s - B + s' + s'': input 2 is -input 0; the small terms far below B at every scale.
      int e = f.emax;
      in[0] = fill<T>(count(0), [&] {
        e = e <= f.emin ? f.emax : e - 1;
        return normal_value<T>(rng, e);
      });
      for (const T b : in[0]) in[2].push_back(make<T>(-value_of(b)));
      for (std::size_t k : {1u, 3u, 4u}) {
        in[k] = fill<T>(count(k), [&] {
          return rng() % 6 == 0 ? subnormal_value<T>(rng)
                                : normal_value<T>(rng, random_exponent<T>(rng));
        });
      }
      break;
    }
    case Kind::kTies: {
      // x + h + t + t' + t'': x in input 0, its binade random (above the lowest, so half its ulp
      // is a value), h (half an ulp of x) in input 1 of the same shape, the tiny terms t
      // broadcast in inputs 2 to 4.
      in[0] = fill<T>(count(0), [&] {
        return normal_value<T>(rng, std::clamp(random_exponent<T>(rng), f.emin + 1, f.emax - 1));
      });
      for (const T x : in[0]) {
        in[2].push_back(make<T>(std::copysign(ulp_at<T>(value_of(x)) / 2, value_of(x))));
      }
      // The tie-breakers, broadcast: the smallest value of T or 2^-60 of the half ulp of 1,
      // far below most x's half ulp.
      const auto tiny = [&] {
        const double t = rng() % 2 != 0
                             ? smallest<T>()
                             : std::max(smallest<T>(), std::ldexp(1.0, -f.precision - 60));
        return rng() % 2 != 0 ? -t : t;
      };
      for (std::size_t k : {1u, 3u, 4u}) in[k] = fill<T>(count(k), tiny);
      std::swap(in[1], in[2]);  // the tie first: x + h, then the tiny terms
      break;
    }
    case Kind::kOverflowBack: {
      // M + M' - M'' ...: near-largest terms whose prefixes pass the largest finite value.
      const auto big = [&] {
        const double m = std::fabs(normal_value<T>(rng, f.emax));
        return rng() % 2 != 0 ? -m : m;
      };
      in[0] = fill<T>(count(0), big);
      in[1] = fill<T>(count(1), [&] { return std::fabs(normal_value<T>(rng, f.emax)); });
      for (const T b : in[0]) in[2].push_back(make<T>(-value_of(b)));
      in[3] = fill<T>(count(3), big);
      in[4] = fill<T>(count(4), [&] { return normal_value<T>(rng, random_exponent<T>(rng)); });
      break;
    }
    default: {
      for (std::size_t k = 0; k < in.size(); ++k) in[k] = sequence<T>(kind, rng, count(k));
      if (kind == Kind::kWideRange) {  // input 2 takes input 0's top values back out
        for (std::size_t i = 0; i < in[0].size(); ++i) {
          if (std::fabs(value_of(in[0][i])) > std::ldexp(1.0, f.emax - 8)) {
            in[2][i] = make<T>(-value_of(in[0][i]));
          }
        }
      }
      break;
    }
  }
  return in;
}

template <class T>
void expect_sum_exact_for(Kind kind, uint64_t seed) {
  Rng rng(seed);
  const std::vector<std::vector<T>> all = sum_inputs<T>(kind, rng);
  for (std::size_t k = 2; k <= all.size(); ++k) {
    const std::vector<std::vector<T>> in(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
    const std::vector<Shape> shapes(sum_shapes(kind).begin(),
                                    sum_shapes(kind).begin() + static_cast<std::ptrdiff_t>(k));
    expect_sum_exact(in, shapes, kind_name(kind));
  }
}

// ---- The suites
// -----------------------------------------------------------------------------------

template <class T>
class ExactCumSum : public testing::Test {};
template <class T>
class ExactSum : public testing::Test {};
template <class T>
class CumProdOneUlp : public testing::Test {};

using FloatTypes = testing::Types<Float16, BFloat16, float, double>;
struct TypeNames {
  template <class T>
  static std::string GetName(int) {  // NOLINT(readability-identifier-naming): gtest's name
    return type_name<T>();
  }
};
TYPED_TEST_SUITE(ExactCumSum, FloatTypes, TypeNames);
TYPED_TEST_SUITE(ExactSum, FloatTypes, TypeNames);
TYPED_TEST_SUITE(CumProdOneUlp, FloatTypes, TypeNames);

TYPED_TEST(ExactCumSum, Cancellation) {
  expect_cumsum_exact_rank3<TypeParam>(Kind::kCancellation, 11);
}
TYPED_TEST(ExactCumSum, TiesDecidedFarBelow) {
  expect_cumsum_exact_rank3<TypeParam>(Kind::kTies, 12);
}
TYPED_TEST(ExactCumSum, WideRange) { expect_cumsum_exact_rank3<TypeParam>(Kind::kWideRange, 13); }
TYPED_TEST(ExactCumSum, OverflowAndBack) {
  expect_cumsum_exact_rank3<TypeParam>(Kind::kOverflowBack, 14);
}
TYPED_TEST(ExactCumSum, Normal) { expect_cumsum_exact_rank3<TypeParam>(Kind::kNormal, 15); }

// The prefixes the brief of the promise names, as they are.
TYPED_TEST(ExactCumSum, OverflowAndBackNamed) {
  using T = TypeParam;
  const double m = std::is_same_v<T, Float16>  ? 60000
                   : std::is_same_v<T, double> ? 0x1.8p1023
                                               : 0x1.2p127;  // near 3e38 in both 8-bit formats
  const std::vector<T> x{make<T>(m), make<T>(m), make<T>(-m), make<T>(-m), make<T>(-m), make<T>(m)};
  // Prefixes m, 2m (Inf), m, 0, -m, 0: the exact values, rounded.
  expect_cumsum_exact(x, {6}, 0, {}, "overflow and back");
  expect_cumsum_exact(x, {6}, 0, {true, true}, "overflow and back");
}

// Data on which any accumulator as wide as double makes no error at all: every implementation,
// exact or not, must give these bits.
TYPED_TEST(ExactCumSum, ExactDataIntegers) {
  expect_cumsum_exact_rank3<TypeParam>(Kind::kIntegers, 21);
}
TYPED_TEST(ExactCumSum, ExactDataDyadic) {
  expect_cumsum_exact_rank3<TypeParam>(Kind::kDyadic, 22);
}
TYPED_TEST(ExactCumSum, ExactDataZeros) { expect_cumsum_exact_rank3<TypeParam>(Kind::kZeros, 23); }
TYPED_TEST(ExactCumSum, ExactDataSpecials) {
  expect_cumsum_exact_rank3<TypeParam>(Kind::kSpecials, 24);
}

// Rows of 10^5 and more, so every tuning cuts them into pieces over several rounds (at the
// default thresholds too: 2^16 and more is a long row) and the threads share them.
TYPED_TEST(ExactCumSum, LongScans) {
  using T = TypeParam;
  constexpr exact::Format f = Fmt<T>::kFormat;
  constexpr std::size_t kN = 100003;
  Rng rng(31);
  // Cancellation and normal data along the whole row.
  for (const Kind kind : {Kind::kCancellation, Kind::kNormal, Kind::kTies}) {
    expect_cumsum_exact(sequence<T>(kind, rng, kN), {static_cast<int64_t>(kN)}, 0, {},
                        std::string("long ") + kind_name(kind));
  }
  // Near-largest terms piled up far beyond what one accumulator of the type could hold (2^32
  // and more for float16), then a tie decided by the smallest value, then the pile taken away.
  std::vector<T> x;
  const double big = std::ldexp(1.75, f.emax);
  for (std::size_t i = 0; i < kN / 2; ++i) x.push_back(make<T>(big));
  x.push_back(make<T>(1));
  x.push_back(make<T>(ulp_at<T>(1) / 2));
  x.push_back(make<T>(smallest<T>()));
  for (std::size_t i = 0; i < kN / 2; ++i) x.push_back(make<T>(-big));
  const Shape shape{static_cast<int64_t>(x.size())};
  expect_cumsum_exact(x, shape, 0, {}, "long pile, tie, pile back");
  expect_cumsum_exact(x, shape, 0, {true, true}, "long pile, tie, pile back");
  // The same along axis 0 of a [n, 2, 3] tensor: the column tiles.
  const std::vector<T> cols = sequence<T>(Kind::kCancellation, rng, 30000 * 6);
  expect_cumsum_exact(along(cols, {30000, 2, 3}, 0, false), {30000, 2, 3}, 0, {},
                      "long cancellation");
}

TYPED_TEST(ExactSum, Cancellation) { expect_sum_exact_for<TypeParam>(Kind::kCancellation, 41); }
TYPED_TEST(ExactSum, TiesDecidedFarBelow) { expect_sum_exact_for<TypeParam>(Kind::kTies, 42); }
TYPED_TEST(ExactSum, WideRange) { expect_sum_exact_for<TypeParam>(Kind::kWideRange, 43); }
TYPED_TEST(ExactSum, OverflowAndBack) { expect_sum_exact_for<TypeParam>(Kind::kOverflowBack, 44); }
TYPED_TEST(ExactSum, Normal) { expect_sum_exact_for<TypeParam>(Kind::kNormal, 45); }
TYPED_TEST(ExactSum, ExactDataIntegers) { expect_sum_exact_for<TypeParam>(Kind::kIntegers, 46); }
TYPED_TEST(ExactSum, ExactDataDyadic) { expect_sum_exact_for<TypeParam>(Kind::kDyadic, 47); }
TYPED_TEST(ExactSum, ExactDataZeros) { expect_sum_exact_for<TypeParam>(Kind::kZeros, 48); }
TYPED_TEST(ExactSum, ExactDataSpecials) { expect_sum_exact_for<TypeParam>(Kind::kSpecials, 49); }

// The three-term sums of the promise, as they are.
TYPED_TEST(ExactSum, OverflowAndBackNamed) {
  using T = TypeParam;
  const double m = std::is_same_v<T, Float16>  ? 60000
                   : std::is_same_v<T, double> ? 0x1.8p1023
                                               : 0x1.2p127;
  const std::vector<std::vector<T>> in{{make<T>(m)}, {make<T>(m)}, {make<T>(-m)}};
  expect_sum_exact(in, {{1}, {1}, {1}}, "overflow and back");
}

// ---- CumProd
// --------------------------------------------------------------------------------------

// The exact product rounded once, from either end of the reference's own rounding interval (the
// same value but where the product lies within n 2^-112 of a rounding boundary). A zero,
// infinity or NaN is exact: both ends are it.
template <class T>
struct Rounded {
  T low, high;
};
template <class T>
Rounded<T> rounded(const exact::Product& p) {
  if (p.nan() || p.inf() || p.zero()) {
    const double inf = HUGE_VAL;
    const double v = p.nan() ? std::nan("") : (p.negative() ? -1 : 1) * (p.inf() ? inf : 0.0);
    const T t = ref::Num<T>::from_double_rounded(v);
    return {t, t};
  }
  const auto end = [&](int side) {
    const ref::Quad v = p.bound(side);
    return ref::Num<T>::round(p.negative() ? -v : v);
  };
  return {end(-1), end(1)};
}

// got is within 1 ulp of the exactly rounded product; a zero, infinity or NaN is exact.
template <class T>
void expect_within_ulp(Misses& m, std::size_t i, T got, const Rounded<T>& want) {
  if (ref::ulp_distance(got, want.low) <= 1 || ref::ulp_distance(got, want.high) <= 1) return;
  m.add(i, "got " + describe(got) + ", want " + describe(want.low) + " within 1 ulp");
}

// Every output on every run within 1 ulp of the exact product, and every run's bits the same.
template <class T>
void expect_cumprod(const std::vector<T>& x, const Shape& shape, int64_t axis, ScanOptions o,
                    const std::string& what) {
  std::vector<Rounded<T>> want(x.size());
  ref::walk_scan(
      shape, axis, o.exclusive, o.reverse, exact::Product{},
      [&](exact::Product p, int64_t i) {
        p.add(value_of(x[static_cast<std::size_t>(i)]));
        return p;
      },
      [&](int64_t i, const exact::Product& p) {
        want[static_cast<std::size_t>(i)] = rounded<T>(p);
      });
  std::vector<T> first;
  std::string first_name;
  const std::vector<Run> chosen = runs(shape[static_cast<std::size_t>(axis)] >= 10000);
  const std::string where =
      "CumProd " + type_name<T>() + " " + what + " " + options_text(shape, axis, o);
  for (const Run& r : chosen) {
    Scoped scoped(r);
    const std::vector<T> got = run_scan(true, x, shape, axis, o);
    Misses m;
    for (std::size_t i = 0; i < x.size(); ++i) expect_within_ulp(m, i, got[i], want[i]);
    m.report(where + " (" + r.name + ")");
    if (m.any()) return;  // one run's misses say it; the others would repeat them
    if (first.empty()) {
      first = got;
      first_name = r.name;
      continue;
    }
    Misses differ;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!ref::same_value(got[i], first[i])) {
        differ.add(i, describe(got[i]) + " vs " + describe(first[i]) + " on " + first_name);
      }
    }
    differ.report(where + ": " + r.name + " differs from " + first_name);
    if (differ.any()) return;
  }
}

// Factors with random full-width significands in [1, 2) or [0.5, 1), steered so the product
// stays within 2^+-2: every multiplication of a long product rounds.
template <class T>
std::vector<T> near_one(Rng& rng, std::size_t n) {
  std::vector<T> v;
  double level = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = std::fabs(normal_value<T>(rng, level > 0 ? -1 : 0));
    level += std::log2(d);
    v.push_back(make<T>(rng() % 2 != 0 ? -d : d));
  }
  return v;
}

// Factors that carry the prefix product far beyond the double range (2^+-2000 and more) and back
// into T's range: runs of near-largest or near-smallest values of T, then the opposite ones.
template <class T>
std::vector<T> out_and_back(Rng& rng, std::size_t n) {
  constexpr exact::Format f = Fmt<T>::kFormat;
  std::vector<T> v;
  double level = 0;  // log2 of the prefix's magnitude
  int direction = 1;
  while (v.size() < n) {
    if (level > 2200) direction = -1;
    if (level < -2200) direction = 1;
    if (direction == 1 && level > -40 && level < 40 && rng() % 3 == 0) {
      direction = -1;  // now and then below the range instead
    }
    const int e =
        direction > 0 ? f.emax - static_cast<int>(rng() % 4) : f.emin + static_cast<int>(rng() % 4);
    const double d = normal_value<T>(rng, e);
    level += std::log2(std::fabs(d));
    v.push_back(make<T>(d));
    // Back near one: a few factors of ordinary size, outputs in range.
    if (std::fabs(level) < 3 * std::max(f.emax, -f.emin)) {
      for (int i = 0; i < 3; ++i)
        v.push_back(make<T>(normal_value<T>(rng, -1 + static_cast<int>(rng() % 3))));
    }
  }
  v.resize(n);
  return v;
}

// The product reference against the hardware: IEEE rounds a * b once, so for two factors one end
// of the reference's interval must give the very bits of a * b (float64; for float32 the float32
// product), the other the same or, where the exact product is a tie, its other neighbour; with
// every class of value.
TEST(ProductReference, TwoFactorsAreTheHardwareProduct) {
  Rng rng(71);
  for (int i = 0; i < 100000; ++i) {
    const auto a = std::bit_cast<double>(rng()), b = std::bit_cast<double>(rng());
    // Half the time a factor that takes the product near or below the bottom of the range.
    const double scaled = i % 2 == 0 ? b
                                     : std::ldexp(1 + static_cast<double>(rng() >> 12) * 0x1p-52,
                                                  -static_cast<int>(rng() % 1100));
    exact::Product p;
    p.add(a);
    p.add(scaled);
    const Rounded<double> r = rounded<double>(p);
    ASSERT_TRUE((ref::same_value(r.low, a * scaled) || ref::same_value(r.high, a * scaled)) &&
                ref::ulp_distance(r.low, r.high) <= 1)
        << std::hexfloat << a << " * " << scaled << ": " << r.low << ", " << r.high;
    const auto fa = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    const auto fb = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    exact::Product q;
    q.add(fa);
    q.add(fb);
    const Rounded<float> rf = rounded<float>(q);
    ASSERT_TRUE((ref::same_value(rf.low, fa * fb) || ref::same_value(rf.high, fa * fb)) &&
                ref::ulp_distance(rf.low, rf.high) <= 1)
        << std::hexfloat << fa << " * " << fb << ": " << rf.low << ", " << rf.high;
  }
}

TYPED_TEST(CumProdOneUlp, NearOneRank3) {
  using T = TypeParam;
  for (int64_t axis = 0; axis < 3; ++axis) {
    const Shape shape = long_on(axis);
    for (const ScanOptions o : kAllOptions) {
      Rng rng(51 + static_cast<uint64_t>(axis));
      expect_cumprod(along(near_one<T>(rng, count(shape)), shape, axis, o.reverse), shape, axis, o,
                     "near one");
    }
  }
}

TYPED_TEST(CumProdOneUlp, BeyondDoubleRangeAndBack) {
  using T = TypeParam;
  Rng rng(52);
  for (const ScanOptions o : kAllOptions) {
    const std::vector<T> x = out_and_back<T>(rng, 3000);
    expect_cumprod(x, {static_cast<int64_t>(x.size())}, 0, o, "beyond double range and back");
  }
  Shape shape{400, 3, 2};
  expect_cumprod(along(out_and_back<T>(rng, 2400), shape, 0, false), shape, 0, {},
                 "beyond double range and back");
}

TYPED_TEST(CumProdOneUlp, ZerosInfinitiesNaN) {
  using T = TypeParam;
  Rng rng(53);
  for (const ScanOptions o : kAllOptions) {
    std::vector<T> x;
    for (int i = 0; i < 600; ++i) {
      const uint64_t r = rng() % 60;
      const double inf = HUGE_VAL;
      x.push_back(
          make<T>(r == 0   ? 0.0
                  : r == 1 ? -0.0
                  : r == 2 ? inf
                  : r == 3 ? -inf
                  : r == 4 ? std::nan("")
                           : (rng() % 2 != 0 ? -1 : 1) * (1 + static_cast<double>(rng() % 4) / 4)));
    }
    // Restart after each zero or NaN, so later prefixes are not all zero or NaN.
    const Shape shape{20, 30};
    expect_cumprod(x, shape, 1, o, "zeros, infinities and NaN");
  }
}

// 10^6 factors: a float64 product in plain double drifts by hundreds of ulps.
TYPED_TEST(CumProdOneUlp, MillionTerms) {
  using T = TypeParam;
  Rng rng(54);
  constexpr std::size_t kN = 1000000;
  expect_cumprod(near_one<T>(rng, kN), {static_cast<int64_t>(kN)}, 0, {}, "10^6 near one");
  const std::vector<T> far = out_and_back<T>(rng, kN);
  expect_cumprod(far, {static_cast<int64_t>(kN)}, 0, {true, true}, "10^6 beyond range and back");
}

// ---- Integers
// -------------------------------------------------------------------------------------

template <class T>
class IntegerScans : public testing::Test {};
using IntTypes = testing::Types<int32_t, int64_t, uint32_t, uint64_t>;
TYPED_TEST_SUITE(IntegerScans, IntTypes, TypeNames);

// Wrapping sums and products, the same bits on every run as the reference's.
TYPED_TEST(IntegerScans, SameEverywhere) {
  using T = TypeParam;
  Rng rng(61);
  for (const bool product : {false, true}) {
    for (int64_t axis = 0; axis < 3; ++axis) {
      const Shape shape = long_on(axis);
      std::vector<T> x(count(shape));
      for (T& e : x) e = static_cast<T>(product ? rng() | 1u : rng());
      for (const ScanOptions o : kAllOptions) {
        const std::vector<T> want = ref::scan_int(product ? ref::Scan::kProd : ref::Scan::kSum, x,
                                                  shape, axis, o.exclusive, o.reverse);
        for (const Run& r : runs()) {
          Scoped scoped(r);
          EXPECT_EQ(run_scan(product, x, shape, axis, o), want)
              << (product ? "CumProd " : "CumSum ") << type_name<T>() << " "
              << options_text(shape, axis, o) << " (" << r.name << ")";
        }
      }
    }
  }
}

}  // namespace
