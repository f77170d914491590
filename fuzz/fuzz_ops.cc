// Fuzzes the operators against the independent reference in tests/reference.h.
//
// The bytes choose an operator (CumSum, CumProd, Sum), a dtype (allowed or not), shapes of rank
// 0-4 with small dimensions (some zero, one now and then long enough for the vector paths),
// an axis (in range in either spelling, just out of range, or any int64), exclusive/reverse, Sum
// inputs (0-6, broadcastable or not, now and then of another dtype), the buffers (separate,
// in place, misaligned, partly overlapping, a wrong output) and the element values (raw bits:
// NaNs, infinities, subnormals; or small numbers). Then one of two paths runs the case:
//   - the C++ API of cumulus/ops.h, or
//   - an ONNX model built for it (any opset 1-26, exclusive/reverse attributes of any value, the
//     axis as an initializer or an input of int32, int64 or a wrong type), through Model::parse
//     and run.
// Whether the case is valid is decided here, from the ONNX operator pages (the version and type
// tables are written out below, not taken from the library). An invalid case must raise
// cumulus::Error; a valid one must not, and its result must match the reference: integers exactly;
// floating CumSum and Sum bit for bit with the exact sum rounded once (tests/exact.h); floating
// CumProd within 1 ulp of the exact product (tests/product_reference.h) and with the same bits
// from every kernel table the process can run (see "Comparing with the reference" below).
// Anything else calls abort().
//
// The last six bytes, read apart from the case, choose the paths it takes (choose_paths below):
// the kernel table (the process's own, or any lower instruction set: CUMULUS_ISA caps the choice
// as it caps the process) and the operators' size thresholds (src/ops/tuning.h), shrunk so that
// these small cases reach long rows cut into pieces over rounds, column and Sum row tiles,
// streamed stores and one chunk per task.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cumulus/error.h"
#include "cumulus/onnx.h"
#include "cumulus/ops.h"
#include "exact.h"
#include "fuzz_util.h"
#include "model_builder.h"
#include "ops/tuning.h"
#include "product_reference.h"
#include "reference.h"

namespace {

using cumulus::ConstTensorView;
using cumulus::DType;
using cumulus::OpKind;
using cumulus::ScanOptions;
using cumulus::SumOptions;
using cumulus::TensorView;
using fuzz::finding;
using fuzz::Reader;
using ref::Quad;
using Shape = std::vector<int64_t>;

// ---- The ONNX operator pages, written out ---------------------------------------------------

// The version of `op` in force at `opset`, or 0 when the operator does not exist there.
int page_version(OpKind op, int64_t opset) {
  switch (op) {
    case OpKind::kCumSum:
      return opset < 11 ? 0 : opset < 14 ? 11 : 14;
    case OpKind::kCumProd:
      return opset < 26 ? 0 : 26;
    case OpKind::kSum:
      break;
  }
  return opset < 6 ? 1 : opset < 8 ? 6 : opset < 13 ? 8 : 13;
}

bool page_allows(OpKind op, int version, DType t) {
  const bool half = t == DType::kFloat16 || t == DType::kBFloat16;
  const bool wide_float = t == DType::kFloat32 || t == DType::kFloat64;
  switch (op) {
    case OpKind::kCumSum:
      return version >= 14 || !half;
    case OpKind::kCumProd:
      return true;
    case OpKind::kSum:
      break;
  }
  return wide_float || t == DType::kFloat16 || (t == DType::kBFloat16 && version >= 13);
}

// The C++ API takes the newest version of each operator.
constexpr int64_t kNewestOpset = 26;

// ---- Helpers --------------------------------------------------------------------------------

std::string shape_text(const Shape& s) { return cumulus::shape_string(s); }

// Raw storage with 8-byte alignment, sized in bytes.
struct Buffer {
  explicit Buffer(std::size_t bytes) : words((bytes + 7) / 8 + 1) {}
  std::byte* data() { return reinterpret_cast<std::byte*>(words.data()); }
  const std::byte* data() const { return reinterpret_cast<const std::byte*>(words.data()); }
  std::vector<uint64_t> words;
};

std::size_t count_of(const Shape& s) { return static_cast<std::size_t>(ref::count_of(s)); }

// A dimension: mostly 1-8, sometimes 0; `long_ok` allows one of up to `long_max`, so rows reach
// the kernels' eight-wide blocks and their remainders.
int64_t decode_dim(Reader& r, bool long_ok, int64_t long_max) {
  const uint8_t v = r.byte();
  if ((v >> 4) == 0xF) return 0;
  if (long_ok && (v >> 4) == 0xE) return 1 + r.below(static_cast<uint32_t>(long_max));
  return 1 + (v & 7);
}

// At most one long dimension, and only in tensors of rank 1 or 2, which keeps cases fast.
Shape decode_shape(Reader& r, int rank, int64_t long_max) {
  Shape s;
  bool long_used = rank > 2;
  for (int d = 0; d < rank; ++d) {
    s.push_back(decode_dim(r, !long_used, long_max));
    long_used = long_used || s.back() > 8;
  }
  return s;
}

int64_t decode_axis(Reader& r, int64_t rank) {
  const uint32_t kind = r.below(8);
  if (kind < 6) {
    const int64_t a = rank > 0 ? r.below(static_cast<uint32_t>(rank)) : 0;
    return r.flag() ? a - rank : a;
  }
  if (kind == 6) {
    const int64_t off = r.below(3);
    return r.flag() ? rank + off : -rank - 1 - off;
  }
  return static_cast<int64_t>(r.u64());
}

template <class T>
T small_value(int64_t v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(v);  // modular for unsigned types
  } else {
    return ref::Num<T>::from_double_rounded(static_cast<double>(v));
  }
}

// Element values: raw bits (NaN payloads, infinities, subnormals, extremes) or small numbers,
// which make sums and products that mean something.
void fill_values(Reader& r, DType dtype, std::size_t count, void* out) {
  const uint32_t mode = r.below(4);
  cumulus::visit_dtype(dtype, [&]<class T>(T) {
    T* p = static_cast<T*>(out);
    for (std::size_t i = 0; i < count; ++i) {
      if (mode < 2) {
        r.fill(&p[i], sizeof(T));
      } else if (mode == 2) {
        p[i] = small_value<T>(static_cast<int64_t>(r.byte() % 9) - 4);
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = small_value<T>(static_cast<int8_t>(r.byte()));
      } else {
        // Sixteenths in [-8, 8).
        p[i] = ref::Num<T>::from_double_rounded((static_cast<int>(r.byte()) - 128) / 16.0);
      }
    }
  });
}

template <class T>
std::vector<T> to_vector(const void* data, std::size_t count) {
  std::vector<T> v(count);
  if (count != 0) std::memcpy(static_cast<void*>(v.data()), data, count * sizeof(T));
  return v;
}

bool same_bytes(const void* a, const void* b, std::size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

// CUMULUS_FUZZ_VERBOSE=1 prints each case and its outcome, to read what an input decodes to.
bool verbose() {
  static const bool on = std::getenv("CUMULUS_FUZZ_VERBOSE") != nullptr;
  return on;
}

// Calls f; an error must come exactly when one is expected. Returns whether f succeeded.
template <class F>
bool expect(bool error_expected, const std::string& what, F&& f) {
  try {
    f();
  } catch (const cumulus::Error& e) {
    if (verbose()) fmt::print(stderr, "{}: error: {}\n", what, e.what());
    if (!error_expected) finding("{}: unexpected error: {}", what, e.what());
    return false;
  }
  if (verbose()) fmt::print(stderr, "{}: ok\n", what);
  if (error_expected) finding("{}: no error for an invalid case", what);
  return true;
}

// ---- Comparing with the reference -----------------------------------------------------------

// The numerical promise, held strictly. CumSum and Sum of a floating type: every output is the
// exact sum of its terms (exact.h) rounded once to the type, bit for bit (any NaN for a NaN).
// CumProd of a floating type: within 1 ulp of the exact product rounded once (float64 included;
// product_reference.h, whose exponent never overflows, so prefixes may leave the double range and
// come back), and the same bits from every kernel table this process can run.

template <class T>
constexpr exact::Format format_of() {
  if constexpr (std::is_same_v<T, cumulus::Float16>) {
    return exact::kBinary16;
  } else if constexpr (std::is_same_v<T, cumulus::BFloat16>) {
    return exact::kBFloat16;
  } else if constexpr (std::is_same_v<T, float>) {
    return exact::kBinary32;
  } else {
    return exact::kBinary64;
  }
}

template <class T>
T from_bits(uint64_t b) {
  T t;
  std::memcpy(&t, &b, sizeof(T));
  return t;
}

template <class T>
std::string show(T x) {
  return fmt::format("{:a} (bits {:#x})", ref::Num<T>::to_double(x),
                     static_cast<uint64_t>(ref::bits_of(x)));
}

// Empty when `got` is the exact sum `s` rounded once to T, else the miss.
template <class T>
std::string check_sum(T got, const exact::Sum& s) {
  const T want = from_bits<T>(s.round_bits(format_of<T>()));
  if (ref::same_value(got, want)) return {};
  return fmt::format("got {}, the exact sum rounded once is {}", show(got), show(want));
}

// Empty when `got` is within 1 ulp of the exact product `p` rounded once (from either end of the
// reference's own, far smaller, rounding interval); zeros, infinities and NaN exactly.
template <class T>
std::string check_product(T got, const exact::Product& p) {
  T low{}, high{};
  if (p.nan() || p.inf() || p.zero()) {
    const double v = p.nan() ? std::numeric_limits<double>::quiet_NaN() : p.inf() ? HUGE_VAL : 0.0;
    low = high = ref::Num<T>::from_double_rounded(p.negative() ? -v : v);
  } else {
    const Quad lo = p.bound(-1), hi = p.bound(1);
    low = ref::Num<T>::round(p.negative() ? -lo : lo);
    high = ref::Num<T>::round(p.negative() ? -hi : hi);
  }
  if (ref::ulp_distance(got, low) <= 1 || ref::ulp_distance(got, high) <= 1) return {};
  return fmt::format("got {}, the exact product rounded once is {}", show(got), show(low));
}

// The table of instruction set `level` (0 scalar, 1 AVX2, 2 AVX-512, 3 AVX512-FP16), or the
// process's own when the level is above it: a higher table could run instructions this CPU lacks.
constexpr uint32_t kLevels = 4;
const cumulus::detail::KernelTable& kernel_table(uint32_t level) {
  const auto& own = cumulus::detail::kernels();
  const std::string_view names[kLevels] = {"scalar", "avx2", "avx512", "avx512fp16"};
  uint32_t own_level = 0;
  while (own_level < kLevels - 1 && names[own_level] != own.isa) ++own_level;
  if (level >= own_level) return own;
  return level == 0   ? cumulus::detail::scalar_kernels()
         : level == 1 ? cumulus::detail::avx2_kernels()
                      : cumulus::detail::avx512_kernels();
}

// A floating CumProd's result on every other table this process can run, thresholds unchanged,
// must have the bits of `got` (a NaN matches any NaN).
template <class T>
void expect_same_on_every_table(const std::vector<T>& x, const std::vector<T>& got,
                                const Shape& shape, int64_t axis, ScanOptions o,
                                const std::string& what) {
  const cumulus::detail::Tuning saved = cumulus::detail::tuning();
  const cumulus::detail::KernelTable* done[kLevels + 1] = {&saved.kernel_table()};
  std::size_t count = 1;
  for (uint32_t level = 0; level < kLevels; ++level) {
    const cumulus::detail::KernelTable* table = &kernel_table(level);
    if (std::find(done, done + count, table) != done + count) continue;
    done[count++] = table;
    cumulus::detail::Tuning other = saved;
    other.table = table;
    cumulus::detail::set_tuning(other);
    std::vector<T> y(x.size());
    cumulus::cumprod(ConstTensorView(cumulus::dtype_of<T>, shape, x.data()), axis,
                     TensorView{cumulus::dtype_of<T>, shape, y.data()}, o);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!ref::same_value(y[i], got[i])) {
        finding("{}: element {}: {} kernels give {}, {} kernels {}", what, i, table->isa,
                show(y[i]), saved.kernel_table().isa, show(got[i]));
      }
    }
  }
  cumulus::detail::set_tuning(saved);
}

void compare_scan(OpKind op, DType dtype, const void* x, const void* y, const Shape& shape,
                  int64_t axis, ScanOptions o, const std::string& what) {
  const std::size_t n = count_of(shape);
  const ref::Scan rop = op == OpKind::kCumSum ? ref::Scan::kSum : ref::Scan::kProd;
  cumulus::visit_dtype(dtype, [&]<class T>(T) {
    const std::vector<T> xv = to_vector<T>(x, n);
    const std::vector<T> got = to_vector<T>(y, n);
    if constexpr (std::is_integral_v<T>) {
      const std::vector<T> want = ref::scan_int(rop, xv, shape, axis, o.exclusive, o.reverse);
      for (std::size_t i = 0; i < n; ++i) {
        if (got[i] != want[i]) {
          finding("{}: element {}: got {}, want {}", what, i, got[i], want[i]);
        }
      }
    } else if (op == OpKind::kCumSum) {
      ref::walk_scan(
          shape, *ref::normalise_axis(axis, static_cast<int64_t>(shape.size())), o.exclusive,
          o.reverse, exact::Sum{},
          [&](exact::Sum s, int64_t i) {
            s.add(ref::Num<T>::to_double(xv[static_cast<std::size_t>(i)]));
            return s;
          },
          [&](int64_t i, const exact::Sum& s) {
            const std::string miss = check_sum(got[static_cast<std::size_t>(i)], s);
            if (!miss.empty()) finding("{}: element {}: {}", what, i, miss);
          });
    } else {
      ref::walk_scan(
          shape, *ref::normalise_axis(axis, static_cast<int64_t>(shape.size())), o.exclusive,
          o.reverse, exact::Product{},
          [&](exact::Product p, int64_t i) {
            p.add(ref::Num<T>::to_double(xv[static_cast<std::size_t>(i)]));
            return p;
          },
          [&](int64_t i, const exact::Product& p) {
            const std::string miss = check_product(got[static_cast<std::size_t>(i)], p);
            if (!miss.empty()) finding("{}: element {}: {}", what, i, miss);
          });
      expect_same_on_every_table(xv, got, shape, axis, o, what);
    }
  });
}

void compare_sum(DType dtype, const std::vector<const void*>& inputs,
                 const std::vector<Shape>& shapes, const Shape& out, const void* y,
                 const std::string& what) {
  cumulus::visit_dtype(dtype, [&]<class T>(T) {
    if constexpr (!std::is_integral_v<T>) {
      const std::vector<T> got = to_vector<T>(y, count_of(out));
      if (got.empty()) return;
      std::vector<std::vector<T>> xs;
      std::vector<Shape> strides;
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        xs.push_back(to_vector<T>(inputs[k], count_of(shapes[k])));
        strides.push_back(ref::row_major_strides(shapes[k]));
      }
      Shape index(out.size(), 0);
      std::size_t flat = 0;
      do {
        exact::Sum s;
        for (std::size_t k = 0; k < xs.size(); ++k) {
          const std::size_t pad = out.size() - shapes[k].size();
          int64_t offset = 0;
          for (std::size_t d = 0; d < shapes[k].size(); ++d) {
            if (shapes[k][d] != 1) offset += index[pad + d] * strides[k][d];
          }
          s.add(ref::Num<T>::to_double(xs[k][static_cast<std::size_t>(offset)]));
        }
        const std::string miss = check_sum(got[flat], s);
        if (!miss.empty()) finding("{}: element {}: {}", what, flat, miss);
        ++flat;
      } while (ref::next_index(index, out, -1));
    } else {
      finding("{}: Sum of integers succeeded", what);
    }
  });
}

// ---- CumSum / CumProd through the C++ API ---------------------------------------------------

enum class ScanBuffers { kSeparate, kInPlace, kMisaligned, kAllocating, kOverlap, kWrongOutput };

void api_scan(Reader& r, OpKind op, DType dtype, const Shape& shape, int64_t axis, ScanOptions o,
              const Buffer& x) {
  const std::size_t item = cumulus::dtype_size(dtype);
  const std::size_t n = count_of(shape);
  const std::size_t bytes = n * item;
  const auto rank = static_cast<int64_t>(shape.size());
  const bool valid = rank > 0 && ref::normalise_axis(axis, rank).has_value() &&
                     page_allows(op, page_version(op, kNewestOpset), dtype);
  const auto mode = static_cast<ScanBuffers>(r.below(6));
  const std::string what =
      fmt::format("{} {} shape {} axis {} exclusive={} reverse={} (API, buffers {})",
                  cumulus::op_name(op), cumulus::dtype_name(dtype), shape_text(shape), axis,
                  o.exclusive, o.reverse, static_cast<int>(mode));
  const auto call = [&](ConstTensorView in, TensorView out) {
    if (op == OpKind::kCumSum) {
      cumulus::cumsum(in, axis, out, o);
    } else {
      cumulus::cumprod(in, axis, out, o);
    }
  };

  Buffer work(bytes + 2 * item);
  std::memset(work.data(), 0xA5, bytes + 2 * item);
  const std::byte* result = nullptr;
  switch (mode) {
    case ScanBuffers::kSeparate:
    case ScanBuffers::kMisaligned: {
      // Misaligned: one element into both buffers, so no vector width divides the address.
      const std::size_t shift = mode == ScanBuffers::kMisaligned ? item : 0;
      Buffer in(bytes + item);
      std::memcpy(in.data() + shift, x.data(), bytes);
      if (!expect(!valid, what, [&] {
            call(ConstTensorView(dtype, shape, in.data() + shift),
                 TensorView{dtype, shape, work.data() + shift});
          })) {
        return;
      }
      if (!same_bytes(in.data() + shift, x.data(), bytes)) finding("{}: input modified", what);
      Buffer poison(item);
      std::memset(poison.data(), 0xA5, item);
      if (!same_bytes(work.data() + shift + bytes, poison.data(), item) ||
          (shift != 0 && !same_bytes(work.data(), poison.data(), item))) {
        finding("{}: wrote outside the output", what);
      }
      result = work.data() + shift;
      break;
    }
    case ScanBuffers::kInPlace: {
      std::memcpy(work.data(), x.data(), bytes);
      if (!expect(!valid, what, [&] {
            call(ConstTensorView(dtype, shape, work.data()), TensorView{dtype, shape, work.data()});
          })) {
        return;
      }
      result = work.data();
      break;
    }
    case ScanBuffers::kAllocating: {
      cumulus::Tensor y;
      if (!expect(!valid, what, [&] {
            const ConstTensorView in(dtype, shape, x.data());
            y = op == OpKind::kCumSum ? cumulus::cumsum(in, axis, o)
                                      : cumulus::cumprod(in, axis, o);
          })) {
        return;
      }
      if (y.dtype() != dtype || y.shape() != shape) {
        finding("{}: result is {} {}", what, cumulus::dtype_name(y.dtype()), shape_text(y.shape()));
      }
      compare_scan(op, dtype, x.data(), y.raw(), shape, axis, o, what);
      return;
    }
    case ScanBuffers::kOverlap: {
      // y one element after x in the same block: they overlap when x has two elements or more.
      std::memcpy(work.data(), x.data(), bytes);
      if (!expect(!valid || n >= 2, what, [&] {
            call(ConstTensorView(dtype, shape, work.data()),
                 TensorView{dtype, shape, work.data() + item});
          })) {
        return;
      }
      result = work.data() + item;
      break;
    }
    case ScanBuffers::kWrongOutput: {
      // Another dtype, or one more element along some dimension.
      Shape other = shape;
      DType other_type = dtype;
      if (rank > 0 && r.flag()) {
        ++other[r.below(static_cast<uint32_t>(rank))];
      } else {
        other_type = cumulus::kAllDTypes[(static_cast<int>(dtype) + 1 + r.below(7)) % 8];
      }
      Buffer out(count_of(other) * 8 + 8);
      expect(true,
             what + " with output " + std::string(cumulus::dtype_name(other_type)) + " " +
                 shape_text(other),
             [&] {
               call(ConstTensorView(dtype, shape, x.data()),
                    TensorView{other_type, other, out.data()});
             });
      return;
    }
  }
  compare_scan(op, dtype, x.data(), result, shape, axis, o, what);
}

// ---- Sum through the C++ API ----------------------------------------------------------------

enum class SumBuffers { kSeparate, kAllocating, kInPlace, kOverlap, kWrongOutput };

struct SumCase {
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  std::vector<Buffer> data;
  Shape decoded_out;  // the shape the inputs were drawn around
};

// The reference's verdict: the output shape, or nullopt when the inputs are invalid.
std::optional<Shape> sum_result_shape(const SumCase& c, int version, bool broadcast) {
  if (c.dtypes.empty() || !page_allows(OpKind::kSum, version, c.dtypes[0])) return std::nullopt;
  for (std::size_t k = 0; k < c.dtypes.size(); ++k) {
    if (c.dtypes[k] != c.dtypes[0]) return std::nullopt;
    if (!broadcast && c.shapes[k] != c.shapes[0]) return std::nullopt;
  }
  return ref::broadcast_shapes(c.shapes);
}

void api_sum(Reader& r, const SumCase& c) {
  const SumOptions o{.broadcast = r.below(4) != 0};
  const std::optional<Shape> out =
      sum_result_shape(c, page_version(OpKind::kSum, kNewestOpset), o.broadcast);
  const std::size_t inputs = c.shapes.size();
  const auto mode = static_cast<SumBuffers>(r.below(5));
  std::string shapes;
  for (std::size_t k = 0; k < inputs; ++k) {
    shapes += fmt::format("{}{} {}", k == 0 ? "" : " + ", cumulus::dtype_name(c.dtypes[k]),
                          shape_text(c.shapes[k]));
  }
  const std::string what = fmt::format("Sum of {} inputs: {} broadcast={} (API, buffers {})",
                                       inputs, shapes, o.broadcast, static_cast<int>(mode));

  // Copies of the inputs; an input may share its block with the output.
  const Shape y_shape = out.value_or(c.decoded_out);
  const DType y_type = inputs > 0 ? c.dtypes[0] : DType::kFloat32;
  const std::size_t y_bytes = count_of(y_shape) * cumulus::dtype_size(y_type);
  const std::size_t target = inputs > 0 ? r.below(static_cast<uint32_t>(inputs)) : 0;
  std::vector<Buffer> in;
  std::vector<std::size_t> in_bytes;
  for (std::size_t k = 0; k < inputs; ++k) {
    in_bytes.push_back(count_of(c.shapes[k]) * cumulus::dtype_size(c.dtypes[k]));
    in.emplace_back(std::max(in_bytes[k], y_bytes) + 8);
    std::memcpy(in[k].data(), c.data[k].data(), in_bytes[k]);
  }
  std::vector<ConstTensorView> views;
  for (std::size_t k = 0; k < inputs; ++k)
    views.emplace_back(c.dtypes[k], c.shapes[k], in[k].data());
  const auto inputs_intact = [&] {
    for (std::size_t k = 0; k < inputs; ++k) {
      if (!same_bytes(in[k].data(), c.data[k].data(), in_bytes[k])) {
        finding("{}: input {} modified", what, k);
      }
    }
  };
  std::vector<const void*> originals;
  for (const Buffer& b : c.data) originals.push_back(b.data());

  Buffer own(y_bytes + 8);
  std::memset(own.data(), 0xA5, y_bytes + 8);
  const std::byte* result = nullptr;
  switch (mode) {
    case SumBuffers::kSeparate: {
      if (!expect(!out, what, [&] {
            cumulus::sum(views, TensorView{y_type, y_shape, own.data()}, o);
          })) {
        return;
      }
      inputs_intact();
      result = own.data();
      break;
    }
    case SumBuffers::kAllocating: {
      cumulus::Tensor y;
      if (!expect(!out, what, [&] { y = cumulus::sum(views, o); })) return;
      if (y.dtype() != y_type || y.shape() != *out) {
        finding("{}: result is {} {}", what, cumulus::dtype_name(y.dtype()), shape_text(y.shape()));
      }
      inputs_intact();
      compare_sum(y_type, originals, c.shapes, *out, y.raw(), what);
      return;
    }
    case SumBuffers::kInPlace: {
      // Over an input: allowed when that input is not broadcast (or holds nothing).
      const bool bad =
          inputs == 0 || (out && c.shapes[target] != *out && count_of(c.shapes[target]) > 0);
      if (!expect(!out || bad, what + fmt::format(", output over input {}", target), [&] {
            cumulus::sum(
                views, TensorView{y_type, y_shape, inputs > 0 ? in[target].data() : own.data()}, o);
          })) {
        return;
      }
      result = in[target].data();
      break;
    }
    case SumBuffers::kOverlap: {
      // The output one element after an input's start: they overlap when that input has two
      // elements or more and the output is not empty.
      const std::size_t item = cumulus::dtype_size(y_type);
      const bool overlaps = inputs > 0 && in_bytes[target] > item && y_bytes > 0;
      if (!expect(
              !out || overlaps, what + fmt::format(", output overlapping input {}", target), [&] {
                cumulus::sum(
                    views,
                    TensorView{y_type, y_shape, inputs > 0 ? in[target].data() + item : own.data()},
                    o);
              })) {
        return;
      }
      inputs_intact();
      result = in[target].data() + item;
      break;
    }
    case SumBuffers::kWrongOutput: {
      Shape other = y_shape;
      DType other_type = y_type;
      if (r.flag()) {
        other.push_back(2);
      } else {
        other_type = cumulus::kAllDTypes[(static_cast<int>(y_type) + 1 + r.below(7)) % 8];
      }
      Buffer wrong(count_of(other) * 8 + 8);
      expect(true,
             what + " with output " + std::string(cumulus::dtype_name(other_type)) + " " +
                 shape_text(other),
             [&] {
               cumulus::sum(views, TensorView{other_type, other, wrong.data()}, o);
             });
      return;
    }
  }
  compare_sum(y_type, originals, c.shapes, *out, result, what);
}

// ---- Both operators through an ONNX model ---------------------------------------------------

int32_t onnx_type(DType t) {
  return cumulus::visit_dtype(t, []<class T>(T) { return model_builder::elem_type_of<T>(); });
}

std::vector<model_builder::Dim> declared_dims(Reader& r, const Shape& shape) {
  std::vector<model_builder::Dim> dims;
  for (int64_t d : shape) {
    dims.push_back(r.below(8) == 0 ? model_builder::Dim::param("n") : model_builder::Dim(d));
  }
  return dims;
}

// Runs `bytes` as a model; returns the outputs or nullopt after an expected error.
std::optional<std::vector<cumulus::Tensor>> run_model(
    const std::string& bytes, const std::map<std::string, ConstTensorView, std::less<>>& feeds,
    bool valid, const std::string& what) {
  std::vector<cumulus::Tensor> outputs;
  if (!expect(!valid, what, [&] {
        const auto model = cumulus::onnx::Model::parse(fuzz::as_bytes(bytes));
        outputs = model.run(feeds);
      })) {
    return std::nullopt;
  }
  return outputs;
}

// The axis as an int64, int32 or float32 TensorProto.
::onnx::TensorProto axis_proto(DType type, const Shape& shape, int64_t axis) {
  const std::size_t n = count_of(shape);
  if (type == DType::kInt32) {
    return model_builder::tensor_proto("axis", shape,
                                       std::vector<int32_t>(n, static_cast<int32_t>(axis)));
  }
  if (type == DType::kFloat32) {
    return model_builder::tensor_proto("axis", shape,
                                       std::vector<float>(n, static_cast<float>(axis)));
  }
  return model_builder::tensor_proto("axis", shape, std::vector<int64_t>(n, axis));
}

void onnx_scan(Reader& r, OpKind op, DType dtype, const Shape& shape, int64_t axis,
               const Buffer& x) {
  const int64_t opset =
      r.flag() ? (op == OpKind::kCumProd ? 26 : 11 + r.below(16)) : 1 + r.below(26);
  const int version = page_version(op, opset);
  const auto rank = static_cast<int64_t>(shape.size());

  // exclusive and reverse: absent, 0, 1 or any int64.
  std::optional<int64_t> attributes[2];
  for (auto& a : attributes) {
    const uint32_t kind = r.below(8);
    if (kind < 3) {
      a = 0;
    } else if (kind < 6) {
      a = 1;
    } else if (kind == 7) {
      a = static_cast<int64_t>(r.u64());
    }
  }
  const auto attribute_ok = [](const std::optional<int64_t>& a) {
    return !a || *a == 0 || *a == 1;
  };

  // The axis tensor: int64, int32 (the value truncated to fit) or float32; 0-D, [1] or [2].
  const uint32_t type_kind = r.below(8);
  const DType axis_type = type_kind < 4   ? DType::kInt64
                          : type_kind < 7 ? DType::kInt32
                                          : DType::kFloat32;
  const uint32_t shape_kind = r.below(8);
  const Shape axis_shape = shape_kind < 5 ? Shape{} : shape_kind < 7 ? Shape{1} : Shape{2};
  if (axis_type == DType::kInt32) axis = static_cast<int32_t>(axis);
  const bool axis_as_input = r.flag();
  const bool declare_shape = r.below(4) != 0;

  const bool valid = version != 0 && page_allows(op, version, dtype) &&
                     attribute_ok(attributes[0]) && attribute_ok(attributes[1]) &&
                     axis_type != DType::kFloat32 && count_of(axis_shape) == 1 && rank > 0 &&
                     ref::normalise_axis(axis, rank).has_value();

  model_builder::ModelBuilder b(opset);
  b.input("x", onnx_type(dtype),
          declare_shape ? std::optional(declared_dims(r, shape)) : std::nullopt);
  cumulus::Tensor axis_tensor(axis_type, axis_shape);
  const ::onnx::TensorProto proto = axis_proto(axis_type, axis_shape, axis);
  std::memcpy(axis_tensor.raw(), proto.raw_data().data(), axis_tensor.nbytes());
  if (axis_as_input) {
    b.input("axis", onnx_type(axis_type));
  } else {
    b.initializer(proto);
  }
  auto& node = b.node(std::string(cumulus::op_name(op)), {"x", "axis"}, {"y"});
  if (attributes[0]) model_builder::set_int(node, "exclusive", *attributes[0]);
  if (attributes[1]) model_builder::set_int(node, "reverse", *attributes[1]);
  b.output("y", onnx_type(dtype));

  std::map<std::string, ConstTensorView, std::less<>> feeds;
  feeds.emplace("x", ConstTensorView(dtype, shape, x.data()));
  if (axis_as_input) feeds.emplace("axis", axis_tensor.view());
  const auto show = [](const std::optional<int64_t>& a) {
    return a ? std::to_string(*a) : std::string("absent");
  };
  const std::string what =
      fmt::format("{} {} shape {} axis {} ({} {}{}) exclusive={} reverse={} (ONNX opset {})",
                  cumulus::op_name(op), cumulus::dtype_name(dtype), shape_text(shape), axis,
                  cumulus::dtype_name(axis_type), shape_text(axis_shape),
                  axis_as_input ? ", fed" : "", show(attributes[0]), show(attributes[1]), opset);
  const auto outputs = run_model(b.bytes(), feeds, valid, what);
  if (!outputs) return;
  if (outputs->size() != 1 || (*outputs)[0].dtype() != dtype || (*outputs)[0].shape() != shape) {
    finding("{}: wrong outputs", what);
  }
  const ScanOptions o{.exclusive = attributes[0] == 1, .reverse = attributes[1] == 1};
  compare_scan(op, dtype, x.data(), (*outputs)[0].raw(), shape, axis, o, what);
}

void onnx_sum(Reader& r, const SumCase& c) {
  const int64_t opset = r.flag() ? 8 + r.below(19) : 1 + r.below(26);
  const int version = page_version(OpKind::kSum, opset);
  const std::optional<Shape> out = sum_result_shape(c, version, version >= 8);
  const std::size_t inputs = c.shapes.size();

  model_builder::ModelBuilder b(opset);
  std::vector<std::string> names;
  std::map<std::string, ConstTensorView, std::less<>> feeds;
  std::string shapes;
  for (std::size_t k = 0; k < inputs; ++k) {
    names.push_back(fmt::format("data_{}", k));
    b.input(names[k], onnx_type(c.dtypes[k]),
            r.below(4) != 0 ? std::optional(declared_dims(r, c.shapes[k])) : std::nullopt);
    feeds.emplace(names[k], ConstTensorView(c.dtypes[k], c.shapes[k], c.data[k].data()));
    shapes += fmt::format("{}{} {}", k == 0 ? "" : " + ", cumulus::dtype_name(c.dtypes[k]),
                          shape_text(c.shapes[k]));
  }
  b.node("Sum", names, {"sum"});
  b.output("sum", inputs > 0 ? onnx_type(c.dtypes[0]) : 0);
  const std::string what =
      fmt::format("Sum of {} inputs: {} (ONNX opset {})", inputs, shapes, opset);
  const auto outputs = run_model(b.bytes(), feeds, out.has_value(), what);
  if (!outputs) return;
  if (outputs->size() != 1 || (*outputs)[0].dtype() != c.dtypes[0] ||
      (*outputs)[0].shape() != *out) {
    finding("{}: wrong outputs", what);
  }
  std::vector<const void*> originals;
  for (const Buffer& buffer : c.data) originals.push_back(buffer.data());
  compare_sum(c.dtypes[0], originals, c.shapes, *out, (*outputs)[0].raw(), what);
}

constexpr DType kFloatTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                 DType::kBFloat16};

SumCase decode_sum(Reader& r) {
  SumCase c;
  const std::size_t inputs = r.below(16) == 0 ? 0 : 1 + r.below(6);
  const DType dtype = r.flag() ? kFloatTypes[r.below(4)] : cumulus::kAllDTypes[r.below(8)];
  const int out_rank = static_cast<int>(r.below(5));
  c.decoded_out = decode_shape(r, out_rank, 40);
  for (std::size_t k = 0; k < inputs; ++k) {
    // Right-aligned with the output: its dimension, 1, or anything; now and then one more
    // leading dimension than the output has.
    const int rank = r.below(8) == 0 ? out_rank + 1 : static_cast<int>(r.below(out_rank + 1));
    Shape shape;
    for (int i = 0; i < rank; ++i) {
      const int od = out_rank - rank + i;
      const uint32_t kind = r.below(8);
      if (od >= 0 && kind < 5) {
        shape.push_back(c.decoded_out[od]);
      } else if (kind < 7) {
        shape.push_back(1);
      } else {
        shape.push_back(decode_dim(r, false, 0));
      }
    }
    c.dtypes.push_back(r.below(16) == 0 ? cumulus::kAllDTypes[r.below(8)] : dtype);
    c.shapes.push_back(std::move(shape));
    const std::size_t n = count_of(c.shapes.back());
    c.data.emplace_back(n * cumulus::dtype_size(c.dtypes.back()));
    fill_values(r, c.dtypes.back(), n, c.data.back().data());
  }
  return c;
}

// ---- The paths: kernel table and thresholds -------------------------------------------------

// From the input's last six bytes (zeros where it is shorter): t[0] the table (0 the process's,
// which is the AVX512-FP16 one where the CPU has it, 1-3 scalar, AVX2, AVX-512); t[1] a bit per
// threshold to shrink; t[2]-t[5] the shrunk values, small enough for the rows of up to 40 elements
// decoded above.
std::string choose_paths(const uint8_t* data, size_t size) {
  uint8_t t[6] = {};
  for (size_t i = 0; i < 6 && i < size; ++i) t[i] = data[size - 1 - i];
  cumulus::detail::Tuning tuning;
  const uint32_t isa = t[0] % 4;
  if (isa != 0) tuning.table = &kernel_table(isa - 1);
  const uint8_t shrink = t[1];
  if ((shrink & 1) != 0) {
    tuning.long_row = 1 + t[2] % 40;
    tuning.piece = 1 + t[3] % 24;
    tuning.pieces_per_round = 1 + t[4] % 4;
  }
  if ((shrink & 2) != 0) tuning.column_tile = 1 + (t[4] >> 2) % 8;
  if ((shrink & 4) != 0) tuning.sum_row_tile = 1 + t[5] % 16;
  if ((shrink & 8) != 0) tuning.stream_bytes = 0;
  if ((shrink & 16) != 0) tuning.min_chunk_elements = 1;
  tuning.stream_every_row = (shrink & 32) != 0;
  cumulus::detail::set_tuning(tuning);
  return fmt::format(
      "kernels {}, long row {}, piece {}, {} per round, column tile {}, Sum row tile {}, stream "
      "from {} bytes{}, chunks of {}",
      tuning.kernel_table().isa, tuning.long_row, tuning.piece, tuning.pieces_per_round,
      tuning.column_tile, tuning.sum_row_tile, tuning.stream_bytes,
      tuning.stream_every_row ? " (every row)" : "", tuning.min_chunk_elements);
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): libFuzzer fixes the name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::limit_memory();
  fuzz::finding_context() = choose_paths(data, size);
  if (verbose()) fmt::print(stderr, "paths: {}\n", fuzz::finding_context());
  Reader r(data, size);
  const uint8_t head = r.byte();
  const auto op = static_cast<OpKind>(head % 3);
  const bool via_onnx = ((head >> 2) & 3) == 0;  // a quarter of the cases
  if (op == OpKind::kSum) {
    const SumCase c = decode_sum(r);
    via_onnx ? onnx_sum(r, c) : api_sum(r, c);
    return 0;
  }
  const DType dtype = cumulus::kAllDTypes[r.below(8)];
  const int rank = static_cast<int>(r.below(5));
  // Rows up to 40 long reach the eight-wide blocks and their remainders; products stay shorter.
  const Shape shape = decode_shape(r, rank, op == OpKind::kCumSum ? 40 : 24);
  const int64_t axis = decode_axis(r, rank);
  const ScanOptions o{.exclusive = r.flag(), .reverse = r.flag()};
  const std::size_t n = count_of(shape);
  Buffer x(n * cumulus::dtype_size(dtype));
  fill_values(r, dtype, n, x.data());
  if (via_onnx) {
    onnx_scan(r, op, dtype, shape, axis, x);
  } else {
    api_scan(r, op, dtype, shape, axis, o, x);
  }
  return 0;
}
