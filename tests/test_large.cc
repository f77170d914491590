// Scans large enough to take the paths small tests never reach: outputs written past the cache
// (32 MB and more) and rows cut into many pieces. Each must give exactly what the in-place scan
// (which never streams) gives, and stay close to a double-precision sum.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "cumulus/ops.h"

namespace cumulus {
namespace {

template <class T>
void check_large(int64_t n, ScanOptions options) {
  Tensor x(dtype_of<T>, {n});
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t i = 0; i < n; ++i) x.data<T>()[i] = from_double<T>(dist(rng));
  const Tensor streamed = cumsum(x, 0, options);
  Tensor in_place = x.clone();
  cumsum(in_place, 0, in_place.view(), options);
  ASSERT_EQ(std::memcmp(streamed.raw(), in_place.raw(), streamed.nbytes()), 0)
      << "streamed and in-place scans differ";
  // Spot checks against a plain double running sum, in scan order.
  double running = 0;
  for (int64_t s = 0; s < n; ++s) {
    const int64_t i = options.reverse ? n - 1 - s : s;
    const double before = running;
    running += to_double(x.data<T>()[i]);
    if (s % 4099 != 0 && s != n - 1) continue;
    const double want = options.exclusive ? before : running;
    const double got = to_double(streamed.data<T>()[i]);
    const double ulp = std::is_same_v<T, double>     ? 1e-9
                       : std::is_same_v<T, float>    ? std::ldexp(1.0, -23)
                       : std::is_same_v<T, BFloat16> ? std::ldexp(1.0, -7)
                                                     : std::ldexp(1.0, -10);
    ASSERT_LE(std::abs(got - want), std::max(std::abs(want), 1.0) * ulp + 1e-6)
        << "element " << i << " (step " << s << ")";
  }
}

TEST(LargeScans, Float32PastTheCache) {
  for (bool reverse : {false, true}) {
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "exclusive " << exclusive << " reverse " << reverse);
      check_large<float>(9'000'011, {.exclusive = exclusive, .reverse = reverse});
    }
  }
}
TEST(LargeScans, Float64PastTheCache) { check_large<double>(4'500'007, {}); }
TEST(LargeScans, Float16PastTheCache) {
  check_large<Float16>(17'000'003, {.exclusive = true, .reverse = true});
}
TEST(LargeScans, BFloat16PastTheCache) { check_large<BFloat16>(17'000'003, {}); }

// Integers: every element against a plain wrapping loop. CumProd draws odd factors, so products
// never collapse to zero.
template <class T>
void check_large_int(int64_t n, bool product, ScanOptions options) {
  using U = std::make_unsigned_t<T>;
  Tensor x(dtype_of<T>, {n});
  std::mt19937_64 rng(11);
  for (int64_t i = 0; i < n; ++i) {
    const auto r = static_cast<U>(rng());
    x.data<T>()[i] = static_cast<T>(product ? U(r | 1u) : r);
  }
  const Tensor y = product ? cumprod(x, 0, options) : cumsum(x, 0, options);
  U running = product ? 1 : 0;
  for (int64_t s = 0; s < n; ++s) {
    const int64_t i = options.reverse ? n - 1 - s : s;
    const U before = running;
    const auto v = static_cast<U>(x.data<T>()[i]);
    running = product ? static_cast<U>(running * v) : static_cast<U>(running + v);
    const U want = options.exclusive ? before : running;
    ASSERT_EQ(static_cast<U>(y.data<T>()[i]), want) << "element " << i << " (step " << s << ")";
  }
}

TEST(LargeScans, IntegersPastTheCache) {
  for (bool reverse : {false, true}) {
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "exclusive " << exclusive << " reverse " << reverse);
      const ScanOptions o{.exclusive = exclusive, .reverse = reverse};
      check_large_int<int32_t>(9'000'011, false, o);
      check_large_int<uint64_t>(4'500'007, false, o);
      check_large_int<uint32_t>(9'000'011, true, o);
      check_large_int<int64_t>(4'500'007, true, o);
    }
  }
}

// Sums with outputs past the cache (streamed), each element against the promise written out:
// the inputs added left to right in double, rounded once.
template <class T>
void check_large_sum(const Shape& matrix) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> dist(-100.0, 100.0);
  const Shape row = {matrix[1]};
  const Shape column = {matrix[0], 1};
  std::vector<Tensor> inputs;
  for (const Shape& s : {matrix, row, matrix, column, Shape{}}) {
    Tensor t(dtype_of<T>, s);
    for (int64_t i = 0; i < t.size(); ++i) t.data<T>()[i] = from_double<T>(dist(rng));
    inputs.push_back(std::move(t));
  }
  const std::vector<ConstTensorView> views(inputs.begin(), inputs.end());
  const Tensor y = sum(views);
  ASSERT_GE(y.nbytes(), std::size_t{32} << 20);
  for (int64_t r = 0; r < matrix[0]; ++r) {
    for (int64_t c = 0; c < matrix[1]; ++c) {
      const int64_t i = r * matrix[1] + c;
      double want = to_double(inputs[0].data<T>()[i]);
      want += to_double(inputs[1].data<T>()[c]);
      want += to_double(inputs[2].data<T>()[i]);
      want += to_double(inputs[3].data<T>()[r]);
      want += to_double(inputs[4].data<T>()[0]);
      const T got = y.data<T>()[i];
      const T expected = from_double<T>(want);
      ASSERT_EQ(std::memcmp(&got, &expected, sizeof(T)), 0)
          << "element [" << r << ", " << c << "]: got " << to_double(got) << ", want " << want;
    }
  }
}

TEST(LargeSums, PastTheCache) {
  check_large_sum<float>({3001, 3007});
  check_large_sum<double>({1501, 3007});
  check_large_sum<Float16>({4001, 4421});
  check_large_sum<BFloat16>({4001, 4421});
}

}  // namespace
}  // namespace cumulus
