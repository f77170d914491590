// An independent, naive reference for the cumulus tests.
//
// It shares no code with the library: half-precision values are decoded from their bit fields with
// std::ldexp and rounded by searching the table of every representable value; axes are normalised,
// shapes broadcast and multi-indices walked here; floating-point results are computed in binary128
// (__float128) and integers in uint64 arithmetic. Only the plain bit-holder types Float16 and
// BFloat16 come from the library's headers. It is slow on purpose.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "cumulus/dtype.h"

namespace ref {

// binary128: 113 significand bits. Sums of the test data are exact in it; a product is off by at
// most 2^-113 relative per factor, far below any tolerance the tests use.
__extension__ typedef __float128 Quad;

inline bool is_nan(Quad q) { return q != q; }
inline Quad abs(Quad q) { return q < 0 ? -q : q; }
inline bool sign_bit(Quad q) {
  uint64_t words[2];
  static_assert(sizeof(words) == sizeof(q));
  std::memcpy(words, &q, sizeof(q));
  return (words[1] >> 63) != 0;  // little endian: the sign lives in the high word
}
inline bool sign_bit(double d) { return std::signbit(d); }

// ---------------------------------------------------------------------------------------------
// Half-precision formats, from first principles.

struct HalfFormat {
  int exp_bits;
  int mant_bits;

  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint16_t exp_field_max() const { return static_cast<uint16_t>((1 << exp_bits) - 1); }
  uint16_t inf_bits() const { return static_cast<uint16_t>(exp_field_max() << mant_bits); }
  // Positive patterns 0 .. max_finite_bits() are exactly the finite non-negative values, in
  // increasing order, and max_finite_bits() + 1 is +infinity.
  uint16_t max_finite_bits() const { return static_cast<uint16_t>(inf_bits() - 1); }
  uint16_t quiet_nan_bits() const {
    return static_cast<uint16_t>(inf_bits() | (1u << (mant_bits - 1)));
  }
};
inline constexpr HalfFormat kBinary16{5, 10};
inline constexpr HalfFormat kBFloat16{8, 7};

inline bool half_is_nan(HalfFormat f, uint16_t bits) {
  const int e = (bits >> f.mant_bits) & f.exp_field_max();
  const int m = bits & ((1 << f.mant_bits) - 1);
  return e == f.exp_field_max() && m != 0;
}

// The exact value of a pattern (every half and bfloat16 value is a double).
inline double decode(HalfFormat f, uint16_t bits) {
  const bool negative = (bits >> 15) != 0;
  const int e = (bits >> f.mant_bits) & f.exp_field_max();
  const int m = bits & ((1 << f.mant_bits) - 1);
  double magnitude;
  if (e == f.exp_field_max()) {
    magnitude =
        m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    magnitude = std::ldexp(static_cast<double>(m), 1 - f.bias() - f.mant_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(m + (1 << f.mant_bits)), e - f.bias() - f.mant_bits);
  }
  return negative ? -magnitude : magnitude;
}

// Every finite non-negative value of the format, indexed by its bit pattern (so ascending).
inline const std::vector<double>& positive_values(HalfFormat f) {
  static const auto build = [](HalfFormat g) {
    std::vector<double> v;
    for (uint32_t b = 0; b <= g.max_finite_bits(); ++b)
      v.push_back(decode(g, static_cast<uint16_t>(b)));
    return v;
  };
  static const std::vector<double> binary16 = build(kBinary16);
  static const std::vector<double> bfloat16 = build(kBFloat16);
  return f.exp_bits == kBinary16.exp_bits ? binary16 : bfloat16;
}

// Where IEEE would put the next value after the largest finite one: 2^(emax + 1). Values at or
// beyond the midpoint between it and the largest finite value round to infinity.
inline double overflow_value(HalfFormat f) { return std::ldexp(1.0, f.bias() + 1); }

// Rounds v (double or Quad) to the nearest value of the format, ties to the even pattern,
// overflowing to infinity; a NaN gives the quiet NaN with v's sign.
template <class R>
uint16_t round_to(HalfFormat f, R v) {
  const auto sign = static_cast<uint16_t>(sign_bit(v) ? 0x8000u : 0u);
  if (v != v) return static_cast<uint16_t>(sign | f.quiet_nan_bits());
  const R a = v < 0 ? -v : v;
  const std::vector<double>& table = positive_values(f);
  // The last value <= a (there is one: table[0] is zero).
  const auto above = std::upper_bound(table.begin(), table.end(), a,
                                      [](R x, double t) { return x < static_cast<R>(t); });
  const auto lo = static_cast<uint32_t>(above - table.begin() - 1);
  uint32_t bits = lo;
  if (static_cast<R>(table[lo]) != a) {
    const double hi_value = lo + 1 < table.size() ? table[lo + 1] : overflow_value(f);
    const R mid = (static_cast<R>(table[lo]) + static_cast<R>(hi_value)) / 2;
    if (a > mid || (a == mid && lo % 2 == 1)) bits = lo + 1;  // lo + 1 may be the infinity
  }
  return static_cast<uint16_t>(sign | bits);
}

// ---------------------------------------------------------------------------------------------
// Per-type helpers: exact value, the reference rounding of an exact value, bits and ulp distance.

template <class T>
struct Num;

template <>
struct Num<float> {
  using Bits = uint32_t;
  static Quad exact(float x) { return x; }
  static float round(Quad q) { return static_cast<float>(q); }  // correctly rounded (soft-fp)
  static bool nan(float x) { return std::isnan(x); }
  static double to_double(float x) { return x; }
  static float from_double_rounded(double d) { return static_cast<float>(d); }
  static float smallest_subnormal() { return std::numeric_limits<float>::denorm_min(); }
};
template <>
struct Num<double> {
  using Bits = uint64_t;
  static Quad exact(double x) { return x; }
  static double round(Quad q) { return static_cast<double>(q); }
  static bool nan(double x) { return std::isnan(x); }
  static double to_double(double x) { return x; }
  static double from_double_rounded(double d) { return d; }
  static double smallest_subnormal() { return std::numeric_limits<double>::denorm_min(); }
};
template <>
struct Num<cumulus::Float16> {
  using Bits = uint16_t;
  static Quad exact(cumulus::Float16 x) { return decode(kBinary16, x.bits); }
  static cumulus::Float16 round(Quad q) { return {round_to(kBinary16, q)}; }
  static bool nan(cumulus::Float16 x) { return half_is_nan(kBinary16, x.bits); }
  static double to_double(cumulus::Float16 x) { return decode(kBinary16, x.bits); }
  static cumulus::Float16 from_double_rounded(double d) { return {round_to(kBinary16, d)}; }
  static cumulus::Float16 smallest_subnormal() { return {1}; }
};
template <>
struct Num<cumulus::BFloat16> {
  using Bits = uint16_t;
  static Quad exact(cumulus::BFloat16 x) { return decode(kBFloat16, x.bits); }
  static cumulus::BFloat16 round(Quad q) { return {round_to(kBFloat16, q)}; }
  static bool nan(cumulus::BFloat16 x) { return half_is_nan(kBFloat16, x.bits); }
  static double to_double(cumulus::BFloat16 x) { return decode(kBFloat16, x.bits); }
  static cumulus::BFloat16 from_double_rounded(double d) { return {round_to(kBFloat16, d)}; }
  static cumulus::BFloat16 smallest_subnormal() { return {1}; }
};

template <class T>
inline constexpr bool kIsFloat =
    std::is_floating_point_v<T> || std::is_same_v<T, cumulus::Float16> ||
    std::is_same_v<T, cumulus::BFloat16>;

template <class T>
auto bits_of(T x) {
  using Bits = std::conditional_t<sizeof(T) == 2, uint16_t,
                                  std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  Bits b;
  static_assert(sizeof(b) == sizeof(x));
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

// Position of a non-NaN value on the number line counted in representable steps; +0 and -0 share
// position 0 and infinity is one past the largest finite value. A position, not a comparison:
// compare with ulp_distance.
template <class T>
int64_t ordinal(T x) {
  const auto b = static_cast<uint64_t>(bits_of(x));
  constexpr int kWidth = 8 * sizeof(T);
  const uint64_t magnitude = b & ((uint64_t{1} << (kWidth - 1)) - 1);
  return (b >> (kWidth - 1)) != 0 ? -static_cast<int64_t>(magnitude)
                                  : static_cast<int64_t>(magnitude);
}

// Never within any tolerance.
inline constexpr int64_t kNoMatch = std::numeric_limits<int64_t>::max();

// The distance in ulps between two values, for comparing a result with the one wanted. Where IEEE
// tells values apart that no number of ulps separates, they never match: +0 and -0 (kNoMatch, not
// 0), an infinity and anything but itself (not 1 step past the largest finite value), NaN and
// anything but a NaN (any NaN matches any NaN). Between finite non-zero values, or a zero and a
// non-zero value, it is the number of representable steps.
template <class T>
int64_t ulp_distance(T a, T b) {
  const bool a_nan = Num<T>::nan(a);
  if (a_nan || Num<T>::nan(b)) return a_nan && Num<T>::nan(b) ? 0 : kNoMatch;
  const double da = Num<T>::to_double(a);
  const double db = Num<T>::to_double(b);
  if (std::isinf(da) || std::isinf(db) || (da == 0 && db == 0)) {
    return bits_of(a) == bits_of(b) ? 0 : kNoMatch;
  }
  const int64_t d = ordinal(a) - ordinal(b);
  return d < 0 ? -d : d;
}

// ---------------------------------------------------------------------------------------------
// Shapes, axes, broadcasting.

using Shape = std::vector<int64_t>;

inline int64_t count_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline Shape row_major_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

// ONNX axis in [-rank, rank - 1] -> [0, rank), or nullopt when out of range.
inline std::optional<int64_t> normalise_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

// NumPy's multidirectional broadcast: align at the right, a 1 stretches, anything else must match.
inline std::optional<Shape> broadcast_shapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    const size_t pad = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[pad + i];
      if (s[i] == o) continue;
      if (o == 1) {
        o = s[i];
      } else if (s[i] != 1) {
        return std::nullopt;
      }
    }
  }
  return out;
}

// Advances a multi-index over `shape`, skipping dimension `skip` (pass -1 for none); false when
// it wraps around.
inline bool next_index(Shape& index, const Shape& shape, int64_t skip) {
  for (size_t d = shape.size(); d-- > 0;) {
    if (static_cast<int64_t>(d) == skip) continue;
    if (++index[d] < shape[d]) return true;
    index[d] = 0;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Scans.

enum class Scan { kSum, kProd };

// The exact result of a floating-point scan or sum at one position, with what a tolerance needs:
// `magnitude` is sum |x_i| for sums and |value| for products; `terms` how many inputs it combines.
struct Exact {
  Quad value = 0;
  Quad magnitude = 0;
  int64_t terms = 0;
};

// Walks every line along `axis` in scan order and calls emit(flat_index, state) for each element,
// with state updated by step(state, flat_index) before (inclusive) or after (exclusive) the emit.
template <class State, class Step, class Emit>
void walk_scan(const Shape& shape, int64_t axis, bool exclusive, bool reverse, State identity,
               Step step, Emit emit) {
  if (count_of(shape) == 0) return;
  const Shape strides = row_major_strides(shape);
  const int64_t n = shape[axis];
  Shape index(shape.size(), 0);
  do {
    int64_t base = 0;
    for (size_t d = 0; d < shape.size(); ++d) base += index[d] * strides[d];
    State state = identity;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t j = reverse ? n - 1 - k : k;
      const int64_t flat = base + j * strides[axis];
      if (exclusive) {
        emit(flat, state);
        state = step(state, flat);
      } else {
        state = step(state, flat);
        emit(flat, state);
      }
    }
  } while (next_index(index, shape, axis));
}

// Integer scan with two's-complement wraparound (uint64 arithmetic, truncated to T).
template <class T>
std::vector<T> scan_int(Scan op, const std::vector<T>& x, const Shape& shape, int64_t axis,
                        bool exclusive, bool reverse) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  std::vector<T> y(x.size());
  const int64_t a = *normalise_axis(axis, static_cast<int64_t>(shape.size()));
  walk_scan(
      shape, a, exclusive, reverse, uint64_t{op == Scan::kSum ? 0u : 1u},
      [&](uint64_t s, int64_t i) {
        const auto v = static_cast<uint64_t>(x[i]);  // sign-extends: same residue mod 2^64
        return op == Scan::kSum ? s + v : s * v;
      },
      [&](int64_t i, uint64_t s) { y[i] = static_cast<T>(static_cast<U>(s)); });
  return y;
}

// Floating-point scan in binary128. An inclusive scan starts from its first element (not from
// identity + x), so the signs of zeros come out as IEEE arithmetic would give them.
template <class T>
std::vector<Exact> scan_float(Scan op, const std::vector<T>& x, const Shape& shape, int64_t axis,
                              bool exclusive, bool reverse) {
  std::vector<Exact> y(x.size());
  const int64_t a = *normalise_axis(axis, static_cast<int64_t>(shape.size()));
  Exact identity;
  identity.value = op == Scan::kSum ? 0 : 1;
  identity.magnitude = op == Scan::kSum ? 0 : 1;
  walk_scan(
      shape, a, exclusive, reverse, identity,
      [&](Exact s, int64_t i) {
        const Quad v = Num<T>::exact(x[i]);
        if (s.terms == 0) {
          s.value = v;
        } else if (op == Scan::kSum) {
          s.value += v;
        } else {
          s.value *= v;
        }
        s.magnitude = op == Scan::kSum ? s.magnitude + abs(v) : abs(s.value);
        ++s.terms;
        return s;
      },
      [&](int64_t i, const Exact& s) { y[i] = s; });
  return y;
}

// ---------------------------------------------------------------------------------------------
// Sum with broadcasting, left to right in binary128.

template <class T>
std::vector<Exact> sum_float(const std::vector<std::vector<T>>& inputs,
                             const std::vector<Shape>& shapes, const Shape& out_shape) {
  const int64_t count = count_of(out_shape);
  std::vector<Exact> y(static_cast<size_t>(count));
  if (count == 0) return y;
  std::vector<Shape> strides;
  for (const Shape& s : shapes) strides.push_back(row_major_strides(s));
  Shape index(out_shape.size(), 0);
  int64_t flat = 0;
  do {
    Exact e;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Shape& s = shapes[k];
      const size_t pad = out_shape.size() - s.size();
      int64_t offset = 0;
      for (size_t d = 0; d < s.size(); ++d) {
        if (s[d] != 1) offset += index[pad + d] * strides[k][d];
      }
      const Quad v = Num<T>::exact(inputs[k][static_cast<size_t>(offset)]);
      e.value = k == 0 ? v : e.value + v;
      e.magnitude += abs(v);
      ++e.terms;
    }
    y[static_cast<size_t>(flat++)] = e;
  } while (next_index(index, out_shape, -1));
  return y;
}

// ---------------------------------------------------------------------------------------------
// Comparing a library result with the reference.

// Enough digits to read a failure report, and tiny values not shown as 0.000000.
inline std::string double_string(double d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", d);
  return text;
}
inline std::string quad_string(Quad q) { return double_string(static_cast<double>(q)); }

// Whether `got` is `want` exactly: any NaN for a NaN, else the same bits (so a zero of the same
// sign).
template <class T>
bool same_value(T got, T want) {
  if (Num<T>::nan(want) || Num<T>::nan(got)) return Num<T>::nan(want) && Num<T>::nan(got);
  return bits_of(got) == bits_of(want);
}

// Empty when `got` meets the promise for the exact value `e`, else a description of the miss.
// For every type a NaN matches only a NaN, an infinity only the same infinity, and a zero
// expected (the exact value rounded) must come out as a zero of the same sign when it comes out
// as a zero.
//   float32, float16, bfloat16: within 1 ulp of the exactly rounded value (see ulp_distance).
//   float64: the library accumulates in double along some fixed tree. Each of the at most
//     terms - 1 additions (multiplications) is off by at most 2^-53 relative, so the classic
//     bound is |got - exact| <= (terms - 1) * 2^-53 * magnitude (+ O(2^-106)); we allow
//     (terms + 1) * 2^-53 * magnitude, plus one subnormal step for results near zero.
template <class T>
std::string check_float(T got, const Exact& e) {
  const bool got_nan = Num<T>::nan(got);
  if (is_nan(e.value) || got_nan) {
    if (is_nan(e.value) && got_nan) return {};
    return "expected " + quad_string(e.value) + ", got " + double_string(Num<T>::to_double(got));
  }
  if constexpr (std::is_same_v<T, double>) {
    const double want = Num<double>::round(e.value);
    const Quad err = abs(static_cast<Quad>(got) - e.value);
    const Quad tol = static_cast<Quad>(e.terms + 1) * std::ldexp(1.0, -53) * e.magnitude +
                     std::numeric_limits<double>::denorm_min();
    if (std::isinf(got) || std::isinf(want) || (got == 0 && want == 0)) {
      if (same_value(got, want)) return {};
    } else if (err <= tol) {
      return {};
    }
    return "expected " + quad_string(e.value) + ", got " + double_string(got) + " (error " +
           quad_string(err) + " > tolerance " + quad_string(tol) + ")";
  } else {
    const T want = Num<T>::round(e.value);
    const int64_t d = ulp_distance(got, want);
    if (d <= 1) return {};
    return "expected " + double_string(Num<T>::to_double(want)) + " (exact " +
           quad_string(e.value) + "), got " + double_string(Num<T>::to_double(got)) + ", " +
           (d == kNoMatch ? std::string("a different value") : std::to_string(d) + " ulps away");
  }
}

// Empty when `got` is the exact value `e` rounded once to nearest even, bit for bit (any NaN for
// a NaN). This is the promise itself, for data where double accumulation provably makes no error:
// every partial result exact in double, whatever the order of the operations.
template <class T>
std::string check_float_exact(T got, const Exact& e) {
  const T want = Num<T>::round(e.value);
  if (same_value(got, want)) return {};
  char text[160];
  std::snprintf(text, sizeof text,
                "expected %.17g (bits %#llx, exact %.17g), got %.17g (bits %#llx)",
                Num<T>::to_double(want), static_cast<unsigned long long>(bits_of(want)),
                static_cast<double>(e.value), Num<T>::to_double(got),
                static_cast<unsigned long long>(bits_of(got)));
  return text;
}

}  // namespace ref
