// Scans and sums large enough to take, at the library's own thresholds, the paths small inputs
// never reach: outputs written past the cache (32 MB and more, streamed) and rows cut into many
// pieces over several rounds. Every element is compared with the independent reference in
// reference.h. The reference is slow
// (binary128 in software; rounding to float16 and bfloat16 is a search), so the half-precision
// scans and the Sums stream from 4 MiB here rather than from 32 MiB;
// tests/test_paths.cc takes the same paths at far smaller thresholds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cumulus/ops.h"
#include "ops/tuning.h"
#include "reference.h"

namespace cumulus {
namespace {

using ref::Scan;

// Counts the misses of one output; one failure names how many and shows the first few.
class Misses {
 public:
  explicit Misses(std::string what) : what_(std::move(what)) {}
  Misses(const Misses&) = delete;
  Misses& operator=(const Misses&) = delete;
  ~Misses() { EXPECT_EQ(count_, 0) << what_ << ": " << count_ << " elements miss" << shown_; }
  void add(int64_t i, const std::string& message) {
    if (count_++ < 4) shown_ += "\n  element " + std::to_string(i) + ": " + message;
  }

 private:
  std::string what_;
  int64_t count_ = 0;
  std::string shown_;
};

// Floating values: sums in [-1, 1]; products +-(1 + k/64), |k| <= 8, steered so that every
// product of consecutive factors stays within 2^+-10.
template <class T>
Tensor floating_row(int64_t n, Scan op, uint64_t seed) {
  Tensor x(dtype_of<T>, {n});
  std::mt19937_64 rng(seed);
  double level = 0;  // log2 of the running product's magnitude
  for (int64_t i = 0; i < n; ++i) {
    double d;
    if (op == Scan::kSum) {
      d = -1 + 2 * static_cast<double>(rng() >> 11) * 0x1p-53;
    } else {
      int k = static_cast<int>(rng() % 17) - 8;
      if (level > 4) k = -1 - static_cast<int>(rng() % 8);
      if (level < -4) k = 1 + static_cast<int>(rng() % 8);
      d = 1 + k / 64.0;
      level += std::log2(d);
      if (rng() % 2 != 0) d = -d;
    }
    x.data<T>()[i] = ref::Num<T>::from_double_rounded(d);
  }
  return x;
}

// Each element of the output against the exact value, built up in scan order in binary128 as
// ref::scan_float builds it (which would hold 48 bytes per element: gigabytes here).
template <class T>
void expect_row_matches(const std::string& what, Scan op, const Tensor& x, ScanOptions options,
                        const Tensor& y) {
  Misses misses(what);
  const int64_t n = x.size();
  ref::Exact e;
  for (int64_t s = 0; s < n; ++s) {
    const int64_t i = options.reverse ? n - 1 - s : s;
    const ref::Exact before = e;
    const ref::Quad v = ref::Num<T>::exact(x.data<T>()[i]);
    // An inclusive scan starts from its first element, so signs of zeros come out as in IEEE.
    e.value = e.terms == 0 ? v : op == Scan::kSum ? e.value + v : e.value * v;
    e.magnitude = op == Scan::kSum ? e.magnitude + ref::abs(v) : ref::abs(e.value);
    ++e.terms;
    // Sums of these values (multiples of 2^-52 below 2^26) are exact in binary128, and CumSum
    // promises them rounded once: bit for bit.
    const ref::Exact& want = options.exclusive ? before : e;
    const std::string miss = op == Scan::kSum ? ref::check_float_exact(y.data<T>()[i], want)
                                              : ref::check_float(y.data<T>()[i], want);
    if (!miss.empty()) misses.add(i, miss);
  }
}

// Outputs stream from 4 MiB for one scope (see the top of the file).
class LowerStreamThreshold {
 public:
  static constexpr std::size_t kBytes = std::size_t{4} << 20;
  LowerStreamThreshold() {
    detail::Tuning t;
    t.stream_bytes = kBytes;
    t.stream_every_row = true;  // every kernel's streaming stores
    detail::set_tuning(t);
  }
  ~LowerStreamThreshold() { detail::set_tuning({}); }
  LowerStreamThreshold(const LowerStreamThreshold&) = delete;
  LowerStreamThreshold& operator=(const LowerStreamThreshold&) = delete;
};

template <class T>
void check_large(int64_t n, Scan op, ScanOptions options) {
  const Tensor x = floating_row<T>(n, op, 7);
  Tensor y(dtype_of<T>, {n});
  op == Scan::kSum ? cumsum(x, 0, y.view(), options) : cumprod(x, 0, y.view(), options);
  ASSERT_GE(y.nbytes(), detail::tuning().stream_bytes);
  expect_row_matches<T>(std::string(dtype_name(dtype_of<T>)), op, x, options, y);
}

TEST(LargeScans, Float32PastTheCache) {
  for (bool reverse : {false, true}) {
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "exclusive " << exclusive << " reverse " << reverse);
      check_large<float>(9'000'011, Scan::kSum, {.exclusive = exclusive, .reverse = reverse});
    }
  }
}
TEST(LargeScans, Float64PastTheCache) { check_large<double>(4'500'007, Scan::kSum, {}); }
TEST(LargeScans, Float16PastTheCache) {
  const LowerStreamThreshold threshold;
  check_large<Float16>(2'100'003, Scan::kSum, {.exclusive = true, .reverse = true});
}
TEST(LargeScans, BFloat16PastTheCache) {
  const LowerStreamThreshold threshold;
  check_large<BFloat16>(2'100'003, Scan::kSum, {});
}
TEST(LargeScans, Float32CumProdPastTheCache) {
  check_large<float>(9'000'011, Scan::kProd, {.reverse = true});
}

// Integers: every element against the reference. CumProd draws odd factors, so products never
// collapse to zero.
template <class T>
void check_large_int(int64_t n, Scan op, ScanOptions options) {
  using U = std::make_unsigned_t<T>;
  std::vector<T> x(static_cast<std::size_t>(n));
  std::mt19937_64 rng(11);
  for (T& v : x) {
    const auto r = static_cast<U>(rng());
    v = static_cast<T>(op == Scan::kProd ? U(r | 1u) : r);
  }
  const Shape shape{n};
  const ConstTensorView xv(dtype_of<T>, shape, x.data());
  const Tensor y = op == Scan::kProd ? cumprod(xv, 0, options) : cumsum(xv, 0, options);
  ASSERT_GE(y.nbytes(), std::size_t{32} << 20);
  const std::vector<T> want = ref::scan_int(op, x, {n}, 0, options.exclusive, options.reverse);
  Misses misses(std::string(dtype_name(dtype_of<T>)));
  for (int64_t i = 0; i < n; ++i) {
    const T got = y.data<T>()[i];
    if (got != want[static_cast<std::size_t>(i)]) {
      misses.add(i, "got " + std::to_string(got) + ", want " +
                        std::to_string(want[static_cast<std::size_t>(i)]));
    }
  }
}

TEST(LargeScans, IntegersPastTheCache) {
  for (bool reverse : {false, true}) {
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "exclusive " << exclusive << " reverse " << reverse);
      const ScanOptions o{.exclusive = exclusive, .reverse = reverse};
      check_large_int<int32_t>(9'000'011, Scan::kSum, o);
      check_large_int<uint64_t>(4'500'007, Scan::kSum, o);
      check_large_int<uint32_t>(9'000'011, Scan::kProd, o);
      check_large_int<int64_t>(4'500'007, Scan::kProd, o);
    }
  }
}

// Sums with streamed outputs: a matrix, a row, a matrix, a column and a scalar.
// Each output row against the reference's sum of the same operands' slices, bit for bit: Sum is
// exact, and binary128 holds sums of five multiples of 2^-52 below 128 exactly.
template <class T>
void check_large_sum(const Shape& matrix) {
  std::mt19937_64 rng(13);
  const int64_t rows = matrix[0], cols = matrix[1];
  std::vector<Tensor> inputs;
  for (const Shape& s : {matrix, Shape{cols}, matrix, Shape{rows, 1}, Shape{}}) {
    Tensor t(dtype_of<T>, s);
    for (int64_t i = 0; i < t.size(); ++i) {
      t.data<T>()[i] =
          ref::Num<T>::from_double_rounded(-100 + 200 * static_cast<double>(rng() >> 11) * 0x1p-53);
    }
    inputs.push_back(std::move(t));
  }
  const std::vector<ConstTensorView> views(inputs.begin(), inputs.end());
  const Tensor y = sum(views);
  ASSERT_GE(y.nbytes(), detail::tuning().stream_bytes);
  Misses misses(std::string(dtype_name(dtype_of<T>)) + " Sum " + shape_string(matrix));
  const auto slice = [](const Tensor& t, int64_t from, int64_t n) {
    return std::vector<T>(t.data<T>() + from, t.data<T>() + from + n);
  };
  const std::vector<ref::Shape> shapes = {{cols}, {cols}, {cols}, {1}, {}};
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<std::vector<T>> operands = {
        slice(inputs[0], r * cols, cols), slice(inputs[1], 0, cols),
        slice(inputs[2], r * cols, cols), slice(inputs[3], r, 1), slice(inputs[4], 0, 1)};
    const std::vector<ref::Exact> want = ref::sum_float(operands, shapes, {cols});
    for (int64_t c = 0; c < cols; ++c) {
      const std::string miss =
          ref::check_float_exact(y.data<T>()[r * cols + c], want[static_cast<std::size_t>(c)]);
      if (!miss.empty()) misses.add(r * cols + c, miss);
    }
  }
}

TEST(LargeSums, PastTheCache) {
  const LowerStreamThreshold threshold;
  check_large_sum<float>({1031, 1021});
  check_large_sum<double>({513, 1031});
  check_large_sum<Float16>({1031, 2039});
  check_large_sum<BFloat16>({1031, 2039});
}

}  // namespace
}  // namespace cumulus
