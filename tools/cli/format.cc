// NumPy 1.24's np.array2string under the default print options, reproduced piece by piece after
// the parts of its arrayprint.py that run (FloatingFormat with Dragon4 digits, IntegerFormat,
// _formatArray), so that each step can be checked against NumPy's own output.
#include "format.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cumulus/dtype.h"
#include "cumulus/onnx.h"

namespace cumulus::cli {
namespace {

constexpr int kPrecision = 8;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 75;
constexpr std::string_view kSeparator = ", ";
constexpr std::string_view kSummary = "...";

// Just enough unsigned arbitrary precision for Dragon4, whose scaled values of a double stay
// within about 1100 bits.
class BigUint {
 public:
  explicit BigUint(uint64_t value) {
    for (; value != 0; value >>= 32) limbs_.push_back(static_cast<uint32_t>(value));
  }

  void multiply(uint32_t factor) {
    uint64_t carry = 0;
    for (uint32_t& limb : limbs_) {
      const uint64_t product = uint64_t{limb} * factor + carry;
      limb = static_cast<uint32_t>(product);
      carry = product >> 32;
    }
    if (carry != 0) limbs_.push_back(static_cast<uint32_t>(carry));
  }

  void multiply_pow10(int exponent) {
    for (; exponent >= 9; exponent -= 9) multiply(1'000'000'000);
    uint32_t factor = 1;
    for (; exponent > 0; --exponent) factor *= 10;
    multiply(factor);
  }

  void shift_left(int bits) {
    limbs_.insert(limbs_.begin(), static_cast<std::size_t>(bits / 32), 0);
    if (bits % 32 != 0) multiply(uint32_t{1} << (bits % 32));
  }

  void add(const BigUint& other) {
    if (limbs_.size() < other.limbs_.size()) limbs_.resize(other.limbs_.size(), 0);
    uint64_t carry = 0;
    for (std::size_t i = 0; i < limbs_.size(); ++i) {
      const uint64_t sum = limbs_[i] + carry + (i < other.limbs_.size() ? other.limbs_[i] : 0);
      limbs_[i] = static_cast<uint32_t>(sum);
      carry = sum >> 32;
    }
    if (carry != 0) limbs_.push_back(static_cast<uint32_t>(carry));
  }

  // Requires *this >= other.
  void subtract(const BigUint& other) {
    int64_t borrow = 0;
    for (std::size_t i = 0; i < limbs_.size(); ++i) {
      const int64_t difference =
          int64_t{limbs_[i]} - borrow - (i < other.limbs_.size() ? int64_t{other.limbs_[i]} : 0);
      limbs_[i] = static_cast<uint32_t>(difference);
      borrow = difference < 0 ? 1 : 0;
    }
    while (!limbs_.empty() && limbs_.back() == 0) limbs_.pop_back();
  }

  friend int compare(const BigUint& a, const BigUint& b) {
    if (a.limbs_.size() != b.limbs_.size()) return a.limbs_.size() < b.limbs_.size() ? -1 : 1;
    for (std::size_t i = a.limbs_.size(); i-- > 0;) {
      if (a.limbs_[i] != b.limbs_[i]) return a.limbs_[i] < b.limbs_[i] ? -1 : 1;
    }
    return 0;
  }

 private:
  std::vector<uint32_t> limbs_;  // least significant first, no high zero limbs
};

// A non-negative value mantissa * 2^exponent of a binary format with its rounding neighbours.
struct Binary {
  uint64_t mantissa = 0;
  int exponent = 0;
  // The gap below is half the gap above: the value is a power of two above the smallest normal.
  bool unequal_gaps = false;
};

// Decimal digits d1d2...dn of the value 0.d1d2...dn * 10^point, without trailing zeros; zero is
// {"0", 1}.
struct Decimal {
  std::string digits = "0";
  int point = 1;
};

// Dragon4 (Steele & White, with NumPy's cutoffs): digits are produced one at a time from the
// exact value and stop once the digits so far, rounded down or up, lie within half a gap of the
// value (ends included for an even mantissa, as round-half-even reads them back) and at least
// min_count digits are out, or when max_count digits are out. The last digit then rounds the way
// that stays within the gaps, else to nearest with ties to even.
class Dragon4 {
 public:
  explicit Dragon4(const Binary& b)
      : value_(b.mantissa), scale_(1), low_gap_(1), high_gap_(1), even_(b.mantissa % 2 == 0) {
    // value / scale is the number, the gaps / scale are half the distances to its neighbours.
    const int extra = b.unequal_gaps ? 1 : 0;
    if (b.exponent >= 0) {
      value_.shift_left(b.exponent + 1 + extra);
      scale_.shift_left(1 + extra);
      low_gap_.shift_left(b.exponent);
      high_gap_.shift_left(b.exponent + extra);
    } else {
      value_.shift_left(1 + extra);
      scale_.shift_left(1 + extra - b.exponent);
      high_gap_.shift_left(extra);
    }
    // Scale to 0.1 <= value / scale < 1; the estimate from log10 may be one off either way.
    point_ = static_cast<int>(
        std::ceil(std::log10(std::ldexp(static_cast<double>(b.mantissa), b.exponent))));
    if (point_ >= 0) {
      scale_.multiply_pow10(point_);
    } else {
      times10(-point_);
    }
    while (compare(value_, scale_) >= 0) {
      scale_.multiply(10);
      ++point_;
    }
    while (compare(tenfold(value_), scale_) < 0) {
      times10(1);
      --point_;
    }
  }

  // The decimal exponent: the value is 0.d1d2... * 10^point().
  int point() const { return point_; }

  Decimal digits(int min_count, int max_count) const {
    Dragon4 state = *this;
    return state.generate(min_count, max_count);
  }

 private:
  static BigUint tenfold(BigUint v) {
    v.multiply(10);
    return v;
  }

  void times10(int n) {
    value_.multiply_pow10(n);
    low_gap_.multiply_pow10(n);
    high_gap_.multiply_pow10(n);
  }

  Decimal generate(int min_count, int max_count) {
    std::string out;
    int digit = 0;
    bool low = false;
    bool high = false;
    for (int count = 1;; ++count) {
      times10(1);
      digit = 0;
      while (compare(value_, scale_) >= 0) {
        value_.subtract(scale_);
        ++digit;
      }
      BigUint value_high = value_;
      value_high.add(high_gap_);
      const int to_low = compare(value_, low_gap_);
      const int to_high = compare(value_high, scale_);
      low = to_low < 0 || (even_ && to_low == 0);
      high = to_high > 0 || (even_ && to_high == 0);
      if (((low || high) && count >= min_count) || count >= max_count) break;
      out += static_cast<char>('0' + digit);
    }
    bool round_down = low;
    if (low == high) {
      BigUint twice = value_;
      twice.multiply(2);
      const int to_half = compare(twice, scale_);
      round_down = to_half < 0 || (to_half == 0 && digit % 2 == 0);
    }
    int point = point_;
    if (round_down) {
      out += static_cast<char>('0' + digit);
    } else if (digit < 9) {
      out += static_cast<char>('0' + digit + 1);
    } else {
      while (!out.empty() && out.back() == '9') out.pop_back();
      if (out.empty()) {
        out = "1";
        ++point;
      } else {
        ++out.back();
      }
    }
    out.erase(out.find_last_not_of('0') + 1);
    return {std::move(out), point};
  }

  BigUint value_, scale_, low_gap_, high_gap_;
  bool even_;
  int point_ = 0;
};

// The stored fields of each element type.
template <class T>
struct BitFields;
template <>
struct BitFields<float> {
  static constexpr int kMantissaBits = 23, kExponentBits = 8;
  static uint64_t bits(float x) { return std::bit_cast<uint32_t>(x); }
};
template <>
struct BitFields<double> {
  static constexpr int kMantissaBits = 52, kExponentBits = 11;
  static uint64_t bits(double x) { return std::bit_cast<uint64_t>(x); }
};
template <>
struct BitFields<Float16> {
  static constexpr int kMantissaBits = 10, kExponentBits = 5;
  static uint64_t bits(Float16 x) { return x.bits; }
};
template <>
struct BitFields<BFloat16> {
  static constexpr int kMantissaBits = 7, kExponentBits = 8;
  static uint64_t bits(BFloat16 x) { return x.bits; }
};

// One element of a float array, decoded.
struct Element {
  bool negative = false;
  bool nan = false;
  bool infinite = false;
  Binary magnitude;
  double abs = 0;  // exact in double for every element type
};

template <class T>
Element decode(T x) {
  using L = BitFields<T>;
  const uint64_t bits = L::bits(x);
  const uint64_t fraction = bits & ((uint64_t{1} << L::kMantissaBits) - 1);
  const auto field =
      static_cast<int>((bits >> L::kMantissaBits) & ((uint64_t{1} << L::kExponentBits) - 1));
  const int bias = (1 << (L::kExponentBits - 1)) - 1;
  Element e;
  e.negative = (bits >> (L::kMantissaBits + L::kExponentBits)) != 0;
  if (field == (1 << L::kExponentBits) - 1) {
    e.nan = fraction != 0;
    e.infinite = fraction == 0;
    return e;
  }
  const bool normal = field != 0;
  e.magnitude.mantissa = normal ? fraction | (uint64_t{1} << L::kMantissaBits) : fraction;
  e.magnitude.exponent = (normal ? field : 1) - bias - L::kMantissaBits;
  e.magnitude.unequal_gaps = field > 1 && fraction == 0;
  e.abs = std::ldexp(static_cast<double>(e.magnitude.mantissa), e.magnitude.exponent);
  return e;
}

// NumPy divides in the array's own type (half types through float32), and the rounded quotient
// decides between positional and exponent notation.
template <class T>
double quotient(double a, double b) {
  if constexpr (std::is_same_v<T, double>) {
    return a / b;
  } else {
    const float q = static_cast<float>(a) / static_cast<float>(b);
    if constexpr (std::is_same_v<T, Float16>) return to_float(to_float16(q));
    if constexpr (std::is_same_v<T, BFloat16>) return to_float(to_bfloat16(q));
    return q;
  }
}

std::string repeat(char c, std::ptrdiff_t n) {
  return std::string(static_cast<std::size_t>(std::max<std::ptrdiff_t>(n, 0)), c);
}
std::string spaces(std::ptrdiff_t n) { return repeat(' ', n); }
std::string zeros(std::ptrdiff_t n) { return repeat('0', n); }

std::ptrdiff_t length(const std::string& s) { return static_cast<std::ptrdiff_t>(s.size()); }

// Digits of a magnitude in positional notation, at most kPrecision of them after the point.
// fillFormat's first pass stops at the shortest unique digits; __call__ passes min_digits=0,
// which prints every digit before the point (float16 4112 prints as 4112., not 4110.).
Decimal positional_digits(const Binary& b, bool all_whole_digits) {
  if (b.mantissa == 0) return {};
  const Dragon4 d(b);
  return d.digits(all_whole_digits ? std::max(d.point(), 1) : 1, d.point() + kPrecision);
}

// Significant digits of a magnitude in exponent notation: the shortest unique ones (at most
// kPrecision + 1) for count 0, else exactly count of them, as __call__ asks with min_digits.
Decimal scientific_digits(const Binary& b, int count) {
  if (b.mantissa == 0) return {};
  const Dragon4 d(b);
  return count == 0 ? d.digits(1, kPrecision + 1) : d.digits(count, count);
}

struct Positional {
  std::string whole;     // sign and integer digits
  std::string fraction;  // digits after the point
};

Positional positional(bool negative, const Decimal& d) {
  Positional p{negative ? "-" : "", ""};
  const auto size = static_cast<int>(d.digits.size());
  if (d.point <= 0) {
    p.whole += '0';
    p.fraction = zeros(-d.point) + d.digits;
  } else if (d.point >= size) {
    p.whole += d.digits + zeros(d.point - size);
  } else {
    p.whole += d.digits.substr(0, static_cast<std::size_t>(d.point));
    p.fraction = d.digits.substr(static_cast<std::size_t>(d.point));
  }
  return p;
}

// The exponent's digits, at least two.
std::string exponent_digits(const Decimal& d) {
  std::string text = std::to_string(std::abs(d.point - 1));
  return text.size() < 2 ? "0" + text : text;
}

// FloatingFormat for floatmode "maxprec" without suppress: fillFormat picks the notation and
// the paddings from a first pass over the shortest digits, then __call__ prints each element.
template <class T>
std::vector<std::string> format_floats(const T* data, std::span<const int64_t> offsets) {
  std::vector<Element> elements;
  elements.reserve(offsets.size());
  for (const int64_t offset : offsets) elements.push_back(decode(data[offset]));

  bool any_nonzero = false;
  bool any_non_finite = false;
  bool negative_infinity = false;
  double max_abs = 0;
  double min_abs = 0;
  for (const Element& e : elements) {
    if (e.nan || e.infinite) {
      any_non_finite = true;
      negative_infinity = negative_infinity || (e.infinite && e.negative);
    } else if (e.abs != 0) {
      max_abs = any_nonzero ? std::max(max_abs, e.abs) : e.abs;
      min_abs = any_nonzero ? std::min(min_abs, e.abs) : e.abs;
      any_nonzero = true;
    }
  }
  const bool scientific =
      any_nonzero && (max_abs >= 1e8 || min_abs < 1e-4 || quotient<T>(max_abs, min_abs) > 1000.0);

  std::ptrdiff_t pad_left = 0;
  std::ptrdiff_t pad_right = 0;
  std::ptrdiff_t precision = 0;
  std::ptrdiff_t exponent_size = 0;
  for (const Element& e : elements) {
    if (e.nan || e.infinite) continue;
    if (scientific) {
      const Decimal d = scientific_digits(e.magnitude, 0);
      pad_left = std::max<std::ptrdiff_t>(pad_left, e.negative ? 2 : 1);
      precision = std::max(precision, length(d.digits) - 1);
      exponent_size = std::max(exponent_size, length(exponent_digits(d)));
    } else {
      const Positional p = positional(e.negative, positional_digits(e.magnitude, false));
      pad_left = std::max(pad_left, length(p.whole));
      pad_right = std::max(pad_right, length(p.fraction));
    }
  }
  if (scientific) pad_right = exponent_size + 2 + precision;
  if (any_non_finite) {
    const std::ptrdiff_t point_and_right = pad_right + 1;
    pad_left =
        std::max({pad_left, 3 - point_and_right, (negative_infinity ? 4 : 3) - point_and_right});
  }

  std::vector<std::string> words;
  words.reserve(elements.size());
  for (const Element& e : elements) {
    if (e.nan || e.infinite) {
      const std::string text = e.nan ? "nan" : e.negative ? "-inf" : "inf";
      words.push_back(spaces(pad_left + pad_right + 1 - length(text)) + text);
    } else if (scientific) {
      const Decimal d = scientific_digits(e.magnitude, static_cast<int>(precision) + 1);
      const std::string fraction = d.digits.substr(1);
      const std::string exponent = exponent_digits(d);
      std::string word = spaces(pad_left - (e.negative ? 2 : 1));
      word += e.negative ? "-" : "";
      word += d.digits[0];
      word += '.';
      word += fraction;
      word += zeros(precision - length(fraction));
      word += d.point - 1 < 0 ? "e-" : "e+";
      word += zeros(exponent_size - length(exponent));
      word += exponent;
      words.push_back(std::move(word));
    } else {
      const Positional p = positional(e.negative, positional_digits(e.magnitude, true));
      words.push_back(spaces(pad_left - length(p.whole)) + p.whole + '.' + p.fraction +
                      spaces(pad_right - length(p.fraction)));
    }
  }
  return words;
}

// IntegerFormat: right-aligned to the widest.
template <class T>
std::vector<std::string> format_integers(const T* data, std::span<const int64_t> offsets) {
  std::vector<std::string> words;
  words.reserve(offsets.size());
  std::size_t width = 0;
  for (const int64_t offset : offsets) {
    words.push_back(std::to_string(data[offset]));
    width = std::max(width, words.back().size());
  }
  for (std::string& word : words) word.insert(0, width - word.size(), ' ');
  return words;
}

bool shows_summary(bool summarize, int64_t length) { return summarize && length > 2 * kEdgeItems; }

// Row-major offsets of the elements numpy prints, in printing order: all of them, or when
// summarizing, the first and last kEdgeItems along every longer axis.
void collect_offsets(std::span<const int64_t> shape, std::size_t axis, int64_t base, bool summarize,
                     std::vector<int64_t>& out) {
  if (axis == shape.size()) {
    out.push_back(base);
    return;
  }
  int64_t stride = 1;
  for (std::size_t i = axis + 1; i < shape.size(); ++i) stride *= shape[i];
  const int64_t n = shape[axis];
  const bool summary = shows_summary(summarize, n);
  for (int64_t i = 0; i < n; ++i) {
    if (summary && i == kEdgeItems) i = n - kEdgeItems;
    collect_offsets(shape, axis + 1, base + i * stride, summarize, out);
  }
}

std::string_view rstrip(std::string_view s) {
  const std::size_t end = s.find_last_not_of(' ');
  return end == std::string_view::npos ? std::string_view() : s.substr(0, end + 1);
}

// _formatArray: nested brackets, rows wrapped at the line width, blank lines between blocks.
class ArrayLayout {
 public:
  ArrayLayout(std::span<const int64_t> shape, std::span<const std::string> words, bool summarize)
      : shape_(shape), words_(words), summarize_(summarize) {}

  std::string render() { return nest(0, " ", kLineWidth); }

 private:
  // _extendLine: a word that does not fit goes on a new line, unless the line holds nothing yet.
  static void extend_line(std::string& text, std::string& line, std::string_view word,
                          int64_t width, std::string_view indent) {
    if (static_cast<int64_t>(line.size() + word.size()) > width && line.size() > indent.size()) {
      text += rstrip(line);
      text += '\n';
      line = indent;
    }
    line += word;
  }

  std::string nest(std::size_t axis, const std::string& indent, int64_t width) {
    if (axis == shape_.size()) return words_[next_word_++];
    const std::size_t axes_left = shape_.size() - axis;
    const std::string inner_indent = indent + ' ';
    const int64_t inner_width = width - 1;  // room for the closing ']'
    const int64_t n = shape_[axis];
    const bool summary = shows_summary(summarize_, n);
    const int64_t shown = summary ? 2 * kEdgeItems : n;

    std::string text;
    if (axes_left == 1) {
      const int64_t element_width = width - 1;  // room for ',' or ']'
      std::string line = indent;
      for (int64_t i = 0; i < shown; ++i) {
        if (i > 0) line += kSeparator;
        if (summary && i == kEdgeItems) {
          extend_line(text, line, kSummary, element_width, indent);
          line += kSeparator;
        }
        extend_line(text, line, nest(axis + 1, inner_indent, inner_width), element_width, indent);
      }
      text += line;
    } else {
      const std::string row_separator = "," + std::string(axes_left - 1, '\n');
      for (int64_t i = 0; i < shown; ++i) {
        if (i > 0) text += row_separator;
        if (summary && i == kEdgeItems) {
          text += indent;
          text += kSummary;
          text += row_separator;
        }
        text += indent + nest(axis + 1, inner_indent, inner_width);
      }
    }
    return "[" + text.substr(indent.size()) + "]";
  }

  std::span<const int64_t> shape_;
  std::span<const std::string> words_;
  bool summarize_;
  std::size_t next_word_ = 0;
};

}  // namespace

std::string format_array(ConstTensorView t) {
  const int64_t count = element_count(t.shape);
  if (count == 0) return "[]";
  const bool summarize = count > kThreshold;
  std::vector<int64_t> offsets;
  collect_offsets(t.shape, 0, 0, summarize, offsets);
  const std::vector<std::string> words = visit_dtype(t.dtype, [&](auto type) {
    using T = decltype(type);
    const T* data = static_cast<const T*>(t.data);
    if constexpr (std::is_integral_v<T>) {
      return format_integers(data, offsets);
    } else {
      return format_floats(data, offsets);
    }
  });
  return ArrayLayout(t.shape, words, summarize).render();
}

std::string format_named(std::string_view name, ConstTensorView t, int indent) {
  const std::string margin(static_cast<std::size_t>(std::max(indent, 0)), ' ');
  std::string text = margin;
  text += name;
  text += ": shape=" + onnx::shape_tuple(t.shape) + ", dtype=";
  text += dtype_name(t.dtype);
  text += '\n';
  const std::string array = format_array(t);
  std::size_t start = 0;
  while (start <= array.size()) {
    std::size_t end = array.find('\n', start);
    if (end == std::string::npos) end = array.size();
    if (end > start) text += margin + "  " + array.substr(start, end - start);
    text += '\n';
    start = end + 1;
  }
  return text;
}

}  // namespace cumulus::cli
