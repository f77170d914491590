// Sum is exact: every output, for every floating type, is the exact sum of its K terms (broadcast
// operands included) rounded once, with IEEE infinities, NaN and zero signs, compared bit for bit
// with the independent exact reference (exact.h). Every kernel table this CPU can run, 1, 2 and 3
// threads, small row tiles and streamed outputs; the data are built to defeat a double
// accumulator: cancellation, ties decided far below the last place, wide ranges with subnormals,
// partial sums beyond the range, infinities and NaN, signed zeros. CTest reruns this binary under
// each CUMULUS_ISA.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cumulus/ops.h"
#include "exact.h"
#include "exact_types.h"
#include "ops/tuning.h"
#include "scoped.h"

namespace {

using cumulus::BFloat16;
using cumulus::ConstTensorView;
using cumulus::DType;
using cumulus::Float16;
using cumulus::Tensor;
using cumulus::detail::KernelTable;
using cumulus::detail::Tuning;
using Shape = std::vector<int64_t>;
using Rng = std::mt19937_64;

using cumulus::testing::ScopedThreads;
using cumulus::testing::ScopedTuning;

// The kernel tables this CPU can run.
std::vector<const KernelTable*> tables() { return exact_test::kernel_tables(); }

// ---- Types: their formats and bits -----------------------------------------------------------

template <class T>
struct Traits;
template <>
struct Traits<float> {
  using Bits = uint32_t;
  static constexpr exact::Format kFormat = exact::kBinary32;
};
template <>
struct Traits<double> {
  using Bits = uint64_t;
  static constexpr exact::Format kFormat = exact::kBinary64;
};
template <>
struct Traits<Float16> {
  using Bits = uint16_t;
  static constexpr exact::Format kFormat = exact::kBinary16;
};
template <>
struct Traits<BFloat16> {
  using Bits = uint16_t;
  static constexpr exact::Format kFormat = exact::kBFloat16;
};

template <class T>
typename Traits<T>::Bits bits_of(T v) {
  typename Traits<T>::Bits b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
template <class T>
T from_bits(uint64_t b) {
  const auto narrow = static_cast<typename Traits<T>::Bits>(b);
  T v;
  std::memcpy(&v, &narrow, sizeof v);
  return v;
}

template <class T>
bool is_nan_bits(uint64_t b) {
  constexpr exact::Format f = Traits<T>::kFormat;
  const uint64_t magnitude = b & ((uint64_t{1} << (f.exp_bits + f.precision - 1)) - 1);
  return magnitude > (((uint64_t{1} << f.exp_bits) - 1) << (f.precision - 1));
}

// The value of T with this sign, biased exponent and significand field, built from its fields so
// the tests need no conversion of the library's.
template <class T>
T make(bool negative, uint64_t biased, uint64_t fraction) {
  constexpr exact::Format f = Traits<T>::kFormat;
  const int width = 1 + f.exp_bits + f.precision - 1;
  return from_bits<T>((uint64_t{negative} << (width - 1)) | (biased << (f.precision - 1)) |
                      (fraction & ((uint64_t{1} << (f.precision - 1)) - 1)));
}
template <class T>
uint64_t max_biased() {
  return (uint64_t{1} << Traits<T>::kFormat.exp_bits) - 2;
}
template <class T>
T infinity(bool negative) {
  return make<T>(negative, max_biased<T>() + 1, 0);
}
template <class T>
T quiet_nan() {
  return make<T>(false, max_biased<T>() + 1, uint64_t{1} << (Traits<T>::kFormat.precision - 2));
}

// A term's exact value as a double (every value of these types is one), from its fields.
template <class T>
double value_of(T v) {
  constexpr exact::Format f = Traits<T>::kFormat;
  const uint64_t b = bits_of(v);
  const int width = 1 + f.exp_bits + f.precision - 1;
  const bool negative = ((b >> (width - 1)) & 1) != 0;
  const uint64_t biased = (b >> (f.precision - 1)) & ((uint64_t{1} << f.exp_bits) - 1);
  const uint64_t fraction = b & ((uint64_t{1} << (f.precision - 1)) - 1);
  const int bias = f.emax;
  double m;
  if (biased == max_biased<T>() + 1) {
    m = fraction != 0 ? std::numeric_limits<double>::quiet_NaN()
                      : std::numeric_limits<double>::infinity();
  } else if (biased == 0) {
    m = std::ldexp(static_cast<double>(fraction), f.emin - (f.precision - 1));
  } else {
    m = std::ldexp(static_cast<double>(fraction | (uint64_t{1} << (f.precision - 1))),
                   static_cast<int>(biased) - bias - (f.precision - 1));
  }
  return negative ? -m : m;
}

std::string hex(uint64_t b) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(b));
  return buf;
}

// ---- Running Sum and checking it ----------------------------------------------------------------

// Operand k's element for output index `flat` of shape `out`, by NumPy broadcasting.
std::size_t operand_index(const Shape& in, const Shape& out, std::size_t flat) {
  std::size_t index = 0, stride = 1;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::size_t od = out.size() - 1 - i;
    std::size_t rest = flat;
    for (std::size_t d = out.size() - 1; d > od; --d) rest /= static_cast<std::size_t>(out[d]);
    const auto o = static_cast<std::size_t>(rest % static_cast<std::size_t>(out[od]));
    const auto dim = static_cast<std::size_t>(in[in.size() - 1 - i]);
    if (dim != 1) index += o * stride;
    stride *= dim;
  }
  return index;
}

Shape broadcast_shape(const std::vector<Shape>& shapes) {
  std::size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (std::size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - 1 - i];
      if (s[s.size() - 1 - i] != 1) o = s[s.size() - 1 - i];
    }
  }
  return out;
}

template <class T>
struct Case {
  std::vector<Shape> shapes;
  std::vector<std::vector<T>> terms;  // per input, in its own shape
};

// The case's inputs as tensors.
template <class T>
std::vector<Tensor> tensors_of(const Case<T>& c) {
  std::vector<Tensor> owned;
  for (std::size_t k = 0; k < c.shapes.size(); ++k) {
    owned.emplace_back(cumulus::dtype_of<T>, c.shapes[k]);
    std::copy(c.terms[k].begin(), c.terms[k].end(), owned.back().template data<T>());
  }
  return owned;
}

// The reference's bits for every output.
template <class T>
std::vector<uint64_t> expected(const Case<T>& c, const Shape& out, std::size_t n) {
  std::vector<uint64_t> want(n);
  for (std::size_t i = 0; i < n; ++i) {
    exact::Sum s;
    for (std::size_t k = 0; k < c.shapes.size(); ++k) {
      s.add(value_of(c.terms[k][operand_index(c.shapes[k], out, i)]));
    }
    want[i] = s.round_bits(Traits<T>::kFormat);
  }
  return want;
}

// Runs Sum over the case with every table, thread count and tuning, and counts the outputs whose
// bits differ from the reference (any NaN matches a NaN).
template <class T>
void check_case(const std::string& what, const Case<T>& c) {
  const Shape out = broadcast_shape(c.shapes);
  std::size_t n = 1;
  for (int64_t d : out) n *= static_cast<std::size_t>(d);
  const std::vector<uint64_t> want = expected(c, out, n);
  const std::vector<Tensor> owned = tensors_of(c);
  const std::vector<ConstTensorView> views(owned.begin(), owned.end());
  for (const KernelTable* table : tables()) {
    for (int threads : {1, 2, 3, 8}) {
      for (const bool small : {false, true}) {
        Tuning t;
        t.table = table;
        if (small) {
          t.sum_row_tile = 37;  // tiles end inside vector groups
          t.min_chunk_elements = 1;
          t.stream_bytes = 0;
        }
        const ScopedTuning tuning(t);
        const ScopedThreads scoped(threads);
        Tensor y(cumulus::dtype_of<T>, out);
        cumulus::sum(views, y.view());
        std::size_t misses = 0;
        std::string shown;
        for (std::size_t i = 0; i < n; ++i) {
          const uint64_t got = bits_of(y.data<T>()[i]);
          if (got == want[i] || (is_nan_bits<T>(got) && is_nan_bits<T>(want[i]))) continue;
          if (misses++ < 3) {
            shown += "\n  output " + std::to_string(i) + ": got " + hex(got) + ", want " +
                     hex(want[i]) + " (terms";
            for (std::size_t k = 0; k < c.shapes.size(); ++k) {
              char buf[40];
              std::snprintf(buf, sizeof buf, " %a",
                            value_of(c.terms[k][operand_index(c.shapes[k], out, i)]));
              shown += buf;
            }
            shown += ")";
          }
        }
        EXPECT_EQ(misses, 0u) << what << " [" << cumulus::dtype_name(cumulus::dtype_of<T>)
                              << "], table " << table->isa << ", " << threads << " threads"
                              << (small ? ", small tiles, streamed" : "") << shown;
      }
    }
  }
}

// ---- Data ---------------------------------------------------------------------------------------

// A value whose biased exponent lies in [lo, hi] (0 for a subnormal), random significand and sign.
template <class T>
T random_value(Rng& rng, uint64_t lo, uint64_t hi) {
  const uint64_t biased = lo + rng() % (hi - lo + 1);
  return make<T>(rng() % 2 != 0, biased, rng());
}

// Terms drawn from a small pool of values in an exponent band, their negations and signed zeros,
// so outputs cancel; `special` in 1000 of the terms are an infinity or a NaN.
template <class T>
Case<T> pooled(Rng& rng, std::vector<Shape> shapes, uint64_t lo, uint64_t hi, int special) {
  std::vector<T> pool;
  for (int i = 0; i < 6; ++i) {
    const T v = random_value<T>(rng, lo, hi);
    pool.push_back(v);
    pool.push_back(from_bits<T>(bits_of(v) ^ bits_of(make<T>(true, 0, 0))));
  }
  pool.push_back(make<T>(true, 0, 0));
  pool.push_back(make<T>(false, 0, 0));
  Case<T> c{std::move(shapes), {}};
  for (const Shape& s : c.shapes) {
    std::size_t n = 1;
    for (int64_t d : s) n *= static_cast<std::size_t>(d);
    std::vector<T> v(n);
    for (T& e : v) {
      const auto r = static_cast<int>(rng() % 1000);
      if (r < special) {
        e = r % 3 == 0 ? quiet_nan<T>() : infinity<T>(r % 2 != 0);
      } else {
        e = pool[rng() % pool.size()];
      }
    }
    c.terms.push_back(std::move(v));
  }
  return c;
}

// Every input the same shape, `values[k]` in every element of input k.
template <class T>
Case<T> constant(const std::vector<T>& values, std::size_t n) {
  Case<T> c;
  for (const T& v : values) {
    c.shapes.push_back({static_cast<int64_t>(n)});
    c.terms.emplace_back(n, v);
  }
  return c;
}

// ---- Tests --------------------------------------------------------------------------------------

template <class T>
T value(double d) {
  // Only for values the tests choose representable in T: built from the double's fields.
  if constexpr (std::is_same_v<T, double>) {
    return d;
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(d);
  } else {
    const uint64_t b = std::bit_cast<uint64_t>(d);
    constexpr exact::Format f = Traits<T>::kFormat;
    const bool negative = (b >> 63) != 0;
    if (d == 0) return make<T>(negative, 0, 0);
    const auto e = static_cast<int>((b >> 52) & 0x7ff) - 1023;
    if (e < f.emin) {  // a subnormal of T: its significand counts units of the least one
      const double units = std::ldexp(std::fabs(d), f.precision - 1 - f.emin);
      return make<T>(negative, 0, static_cast<uint64_t>(units));
    }
    const uint64_t fraction = (b & ((uint64_t{1} << 52) - 1)) >> (53 - f.precision);
    return make<T>(negative, static_cast<uint64_t>(e + f.emax), fraction);
  }
}

// Runs `body` for each floating type.
template <class F>
void each_type(F body) {
  body(float{});
  body(double{});
  body(Float16{});
  body(BFloat16{});
}

// The largest finite value's exponent as a power of two: 2^top is below the maximum.
template <class T>
int top_exponent() {
  return Traits<T>::kFormat.emax;
}

TEST(ExactSum, CancellationLeavesTheSmallTerm) {
  each_type([]<class T>(T) {
    const double big = std::ldexp(1.0, top_exponent<T>() - 1);
    check_case<T>("big + 1 - big", constant<T>({value<T>(big), value<T>(1), value<T>(-big)}, 77));
    check_case<T>("1 + big - big", constant<T>({value<T>(1), value<T>(big), value<T>(-big)}, 77));
    check_case<T>("big - big + 1 + 1",
                  constant<T>({value<T>(big), value<T>(-big), value<T>(1), value<T>(1)}, 77));
  });
}

// 1 + half an ulp is a tie; a term far below the last place decides it.
TEST(ExactSum, TiesDecidedFarBelowTheLastPlace) {
  each_type([]<class T>(T) {
    const int p = Traits<T>::kFormat.precision;
    const double half = std::ldexp(1.0, -p);
    const int far = std::max(Traits<T>::kFormat.emin - p + 2, -1000);
    for (const double tiny : {std::ldexp(1.0, far), -std::ldexp(1.0, far)}) {
      check_case<T>("1 + half ulp + tiny",
                    constant<T>({value<T>(1), value<T>(half), value<T>(tiny)}, 45));
      check_case<T>("tiny + 1 + half ulp",
                    constant<T>({value<T>(tiny), value<T>(1), value<T>(half)}, 45));
      check_case<T>(
          "3 half ulps + 1 + tiny",  // 1 + 3/2 ulp: a tie the other way
          constant<T>({value<T>(half), value<T>(1), value<T>(2 * half), value<T>(tiny)}, 45));
    }
  });
}

// The same tie with its deciding term broadcast: a broadcast operand's range counts too.
TEST(ExactSum, BroadcastTermsCountInTheRange) {
  each_type([]<class T>(T) {
    const int p = Traits<T>::kFormat.precision;
    const double half = std::ldexp(1.0, -p);
    const int far = std::max(Traits<T>::kFormat.emin - p + 2, -1000);
    Case<T> c{{{77}, {77}, {}}, {}};
    c.terms.emplace_back(77, value<T>(1));
    c.terms.emplace_back(77, value<T>(half));
    c.terms.push_back({value<T>(std::ldexp(1.0, far))});
    check_case<T>("1 + half ulp + broadcast tiny", c);
  });
}

// Three float32 terms 29 exponents apart, just past the range whose double sum is exact for three
// terms (27): the last addition in double leaves a tie at 2 + 2^-23, a float32 midpoint, and
// loses the 2^-52 that decides it.
TEST(ExactSum, JustPastTheDoublePathsRange) {
  const float a = 2 - 0x1p-23f, b = 127 * 0x1p-29f, c = 0x1p-29f + 0x1p-52f;
  check_case<float>("(2 - 2^-23) + 127 2^-29 + (2^-29 + 2^-52)", constant<float>({a, b, c}, 45));
}

// The same three terms at one output of a row whose others lie well within the range, at every
// position of a vector group (32 outputs) and of the lone vectors and scalar tail after it: each
// lane's range must reach the group's check, whichever half of a 16-lane range register holds it.
TEST(ExactSum, OneOutputPastTheRangeAtEveryLane) {
  const float a = 2 - 0x1p-23f, b = 127 * 0x1p-29f, c = 0x1p-29f + 0x1p-52f;
  for (std::size_t at = 0; at < 45; ++at) {
    Case<float> row = constant<float>({1.5f, 0.25f, 0.125f}, 45);
    row.terms[0][at] = a;
    row.terms[1][at] = b;
    row.terms[2][at] = c;
    check_case<float>("the tie at output " + std::to_string(at) + " of 45", row);
  }
}

// float16 terms just past the range whose float sum is exact (sum.inc's float16 path: the largest
// and smallest exponent fields at most 13 - ceil(log2 K) apart, a subnormal counting as field 1):
// K - 1 terms of one binade below 1 that sum to a float16 midpoint M in [1, 2), and +-2^-24 on the
// side of M's odd neighbour. The exact sum rounds to that neighbour; added in float, 2^-24 is half
// an ulp of M and goes, M's last float bit being even, and M rounds to the even neighbour. The
// fields lie one past the range, or two where K - 1 terms of the binade one past could not reach 1
// (K = 2^j + 1: two terms below 1 and 2^-24 need only 24 bits), so each case shows the range
// check at its edge.
struct HalfEdge {
  std::size_t terms;
  std::vector<Float16> row;  // the K - 1 terms of the binade, then the small one
};
std::vector<HalfEdge> half_edges(Rng& rng) {
  std::vector<HalfEdge> edges;
  for (const std::size_t k : {3, 4, 5, 8, 9, 16, 17, 32}) {
    const int log2 = static_cast<int>(std::bit_width(k - 1));
    const int past = k - 1 > (std::size_t{1} << (log2 - 1)) ? 1 : 2;
    const uint64_t field = static_cast<uint64_t>(13 - log2 + past) + 1;  // the small term's is 1
    int found = 0;
    for (int tries = 0; found < 3 && tries < 1000; ++tries) {
      std::vector<Float16> row;
      double sum = 0;
      for (std::size_t i = 0; i + 2 < k; ++i) {
        row.push_back(make<Float16>(false, field, rng()));
        sum += value_of(row.back());
      }
      // The last of the binade's terms makes the sum an odd multiple of 2^-11 in [1, 2).
      const double low = std::ldexp(1.0, static_cast<int>(field) - 15);
      const double m = std::ldexp(2 * std::floor(std::ldexp(sum + 1.5 * low, 10)) + 1, -11);
      const double last = m - sum;
      if (m < 1 || m >= 2 || last < low || last >= 2 * low) continue;
      row.push_back(value<Float16>(last));
      if (value_of(row.back()) != last) continue;
      // The odd neighbour: M + 2^-11 where M's significand rounds up to an odd one.
      const bool up = (static_cast<uint64_t>(std::ldexp(m + std::ldexp(1.0, -11), 10)) & 1) != 0;
      row.push_back(value<Float16>(up ? 0x1p-24 : -0x1p-24));
      edges.push_back({k, std::move(row)});
      ++found;
    }
    EXPECT_EQ(found, 3) << k << " terms: no sum of the binade's terms reached a midpoint in [1, 2)";
  }
  return edges;
}

TEST(ExactSum, Float16JustPastTheFloatPathsRange) {
  Rng rng(31);
  for (const HalfEdge& e : half_edges(rng)) {
    // The small term last, first, and broadcast: its range must count wherever it comes.
    Case<Float16> last, first, broadcast;
    for (std::size_t i = 0; i < e.terms; ++i) {
      last.shapes.push_back({45});
      last.terms.emplace_back(45, e.row[i]);
      first.shapes.push_back({45});
      first.terms.emplace_back(45, e.row[(i + e.terms - 1) % e.terms]);
      broadcast.shapes.push_back(i + 1 < e.terms ? Shape{45} : Shape{});
      broadcast.terms.emplace_back(i + 1 < e.terms ? 45 : 1, e.row[i]);
    }
    const std::string what = std::to_string(e.terms) + " terms";
    check_case<Float16>(what + ", the small one last", last);
    check_case<Float16>(what + ", the small one first", first);
    check_case<Float16>(what + ", the small one broadcast", broadcast);
  }
}

// One such output among outputs well within the range, at every position of two vector groups
// (32 outputs each) and the scalar tail after them.
TEST(ExactSum, Float16OneOutputPastTheRangeAtEveryLane) {
  Rng rng(37);
  const std::vector<HalfEdge> edges = half_edges(rng);
  for (const HalfEdge& e : {edges.front(), edges[4]}) {
    for (std::size_t at = 0; at < 70; ++at) {
      Case<Float16> row = constant<Float16>(std::vector<Float16>(e.terms, value<Float16>(0.5)), 70);
      for (std::size_t i = 0; i < e.terms; ++i) row.terms[i][at] = e.row[i];
      check_case<Float16>(
          std::to_string(e.terms) + " terms, the edge at output " + std::to_string(at) + " of 70",
          row);
    }
  }
}

TEST(ExactSum, BeyondTheRangeAndBack) {
  each_type([]<class T>(T) {
    const T max = make<T>(false, max_biased<T>(), ~uint64_t{0});
    const T neg_max = make<T>(true, max_biased<T>(), ~uint64_t{0});
    const T one = value<T>(1);
    check_case<T>("max + max + max", constant<T>({max, max, max}, 40));
    check_case<T>("max + max - max", constant<T>({max, max, neg_max}, 40));
    check_case<T>("max + max - max - max + 1", constant<T>({max, max, neg_max, neg_max, one}, 40));
    check_case<T>("-max - max + max", constant<T>({neg_max, neg_max, max}, 40));
    // Half an ulp above the maximum rounds to infinity; just below, to the maximum.
    const T ulp_half = make<T>(false, max_biased<T>() - Traits<T>::kFormat.precision, 0);
    check_case<T>("max + half ulp + 0", constant<T>({max, ulp_half, value<T>(0)}, 40));
    check_case<T>("max + half ulp - tiny", constant<T>({max, ulp_half, make<T>(true, 1, 0)}, 40));
  });
}

TEST(ExactSum, InfinitiesNanAndSignedZeros) {
  each_type([]<class T>(T) {
    const T inf = infinity<T>(false), ninf = infinity<T>(true), nan = quiet_nan<T>();
    const T nz = make<T>(true, 0, 0), pz = make<T>(false, 0, 0), one = value<T>(1);
    const T max = make<T>(false, max_biased<T>(), ~uint64_t{0});
    check_case<T>("1 + inf + 1", constant<T>({one, inf, one}, 20));
    check_case<T>("max + max + -inf", constant<T>({max, max, ninf}, 20));
    check_case<T>("inf + 1 - inf", constant<T>({inf, one, ninf}, 20));
    check_case<T>("1 + 1 + nan", constant<T>({one, one, nan}, 20));
    check_case<T>("-0 + -0", constant<T>({nz, nz}, 20));
    check_case<T>("-0", constant<T>({nz}, 20));
    check_case<T>("-0 + -0 + -0", constant<T>({nz, nz, nz}, 20));
    check_case<T>("-0 + -0 + +0 + -0", constant<T>({nz, nz, pz, nz}, 20));
    check_case<T>("1 - 1 + -0", constant<T>({one, value<T>(-1), nz}, 20));
    check_case<T>("-0 + 1 + -1 + -0", constant<T>({nz, one, value<T>(-1), nz}, 20));
  });
}

// Pools of values over the whole range, subnormals included, or in a narrow band (the double path),
// with specials among them, broadcast over 2 to 6 inputs.
TEST(ExactSum, RandomPoolsWithBroadcasting) {
  const std::vector<std::vector<Shape>> layouts = {
      {{3, 77}, {3, 77}},
      {{3, 77}, {77}, {}},
      {{3, 1}, {1, 77}, {3, 77}, {}},
      {{131}, {131}, {131}, {131}, {131}},
      {{2, 3, 41}, {3, 1}, {41}, {2, 1, 41}, {}, {2, 3, 41}},
      {{5, 66}, {5, 66}, {5, 66}},
  };
  Rng rng(7);
  each_type([&]<class T>(T) {
    const uint64_t top = max_biased<T>();
    for (std::size_t l = 0; l < layouts.size(); ++l) {
      const std::string where = "layout " + std::to_string(l);
      check_case<T>(where + ", whole range", pooled<T>(rng, layouts[l], 0, top, 0));
      check_case<T>(where + ", subnormals and the smallest normals",
                    pooled<T>(rng, layouts[l], 0, 3, 0));
      check_case<T>(where + ", near the top", pooled<T>(rng, layouts[l], top - 2, top, 0));
      check_case<T>(where + ", narrow band",
                    pooled<T>(rng, layouts[l], top / 2 - 5, top / 2 + 5, 0));
      check_case<T>(where + ", with specials", pooled<T>(rng, layouts[l], 0, top, 60));
    }
  });
}

// Many inputs: float16 past the terms that sum exactly in double, float32 past the range the
// double path can prove.
TEST(ExactSum, ManyInputs) {
  Rng rng(11);
  each_type([&]<class T>(T) {
    for (const std::size_t k : {std::size_t{17}, std::size_t{300}}) {
      const std::vector<Shape> shapes(k, Shape{40});
      check_case<T>(std::to_string(k) + " inputs, whole range",
                    pooled<T>(rng, shapes, 0, max_biased<T>(), 0));
      check_case<T>(std::to_string(k) + " inputs, narrow band",
                    pooled<T>(rng, shapes, max_biased<T>() / 2, max_biased<T>() / 2 + 3, 0));
    }
  });
  // 8200 float16 maxima, the least subnormal, 8200 negated maxima: the partial sums pass 2^29,
  // where a double's ulp is 2^-23 and loses the small term.
  std::vector<Float16> values;
  const Float16 max = make<Float16>(false, max_biased<Float16>(), ~uint64_t{0});
  for (int i = 0; i < 8200; ++i) values.push_back(max);
  values.push_back(make<Float16>(false, 0, 1));
  for (int i = 0; i < 8200; ++i)
    values.push_back(make<Float16>(true, max_biased<Float16>(), ~uint64_t{0}));
  check_case<Float16>("8200 maxima + 2^-24 - 8200 maxima", constant<Float16>(values, 9));
}

// ---- The vector tables against the scalar one ---------------------------------------------------

// Sum's output bits over the case with `table`, one thread, streamed where the tuning lets it.
template <class T>
std::vector<uint64_t> table_bits(const KernelTable* table, const Case<T>& c, bool small) {
  const std::vector<Tensor> owned = tensors_of(c);
  const std::vector<ConstTensorView> views(owned.begin(), owned.end());
  Tuning t;
  t.table = table;
  if (small) {
    t.sum_row_tile = 37;
    t.min_chunk_elements = 1;
    t.stream_bytes = 0;
  }
  const ScopedTuning tuning(t);
  const ScopedThreads scoped(1);
  Tensor y(cumulus::dtype_of<T>, broadcast_shape(c.shapes));
  cumulus::sum(views, y.view());
  std::vector<uint64_t> bits(static_cast<std::size_t>(y.size()));
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = bits_of(y.data<T>()[i]);
  return bits;
}

// Every vector table gives the scalar table's bits (any NaN for a NaN) on rows long enough for
// whole vector groups: random pools, cancelling pools, specials, and narrow bands where one term
// in 40 comes from the whole range, so single lanes of a group leave the fast paths.
TEST(ExactSum, VectorTablesMatchTheScalarTable) {
  const std::vector<std::vector<Shape>> layouts = {
      {{4, 517}, {4, 517}, {4, 517}},
      {{4, 517}, {517}, {}, {4, 517}},
      {{2, 300}, {2, 300}, {2, 300}, {2, 300}, {2, 300}, {2, 300}, {2, 300}},
  };
  Rng rng(23);
  each_type([&]<class T>(T) {
    const uint64_t top = max_biased<T>();
    std::vector<std::pair<std::string, Case<T>>> cases;
    for (std::size_t l = 0; l < layouts.size(); ++l) {
      const std::string where = "layout " + std::to_string(l);
      cases.emplace_back(where + ", whole range", pooled<T>(rng, layouts[l], 0, top, 0));
      cases.emplace_back(where + ", specials", pooled<T>(rng, layouts[l], 0, top, 30));
      Case<T> band = pooled<T>(rng, layouts[l], top / 2 - 3, top / 2 + 3, 0);
      for (auto& terms : band.terms) {
        for (T& e : terms) {
          if (rng() % 40 == 0) e = random_value<T>(rng, 0, top);
        }
      }
      cases.emplace_back(where + ", narrow band with strays", std::move(band));
    }
    for (const auto& [what, c] : cases) {
      for (const bool small : {false, true}) {
        const std::vector<uint64_t> want = table_bits(&cumulus::detail::scalar_kernels(), c, small);
        for (const KernelTable* table : tables()) {
          const std::vector<uint64_t> got = table_bits(table, c, small);
          std::size_t misses = 0;
          std::string shown;
          for (std::size_t i = 0; i < want.size(); ++i) {
            if (got[i] == want[i] || (is_nan_bits<T>(got[i]) && is_nan_bits<T>(want[i]))) continue;
            if (misses++ < 3)
              shown += "\n  output " + std::to_string(i) + ": " + hex(got[i]) + ", scalar " +
                       hex(want[i]);
          }
          EXPECT_EQ(misses, 0u) << what << " [" << cumulus::dtype_name(cumulus::dtype_of<T>)
                                << "], table " << table->isa << (small ? ", small tiles" : "")
                                << shown;
        }
      }
    }
  });
}

}  // namespace
