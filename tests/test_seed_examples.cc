// Every example printed on the three operator pages, with the values printed there.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "cumulus/ops.h"
#include "seed_pages.h"

namespace cumulus {
namespace {

using testing::PageExample;
using testing::PageTensor;

Tensor to_tensor(const PageTensor& p) {
  const auto dtype = dtype_from_name(p.dtype);
  if (!dtype) throw std::runtime_error("page dtype " + p.dtype);
  Tensor t(*dtype, p.shape);
  if (static_cast<std::size_t>(t.size()) != p.tokens.size()) {
    throw std::runtime_error(p.name + ": shape and printed values disagree");
  }
  visit_dtype(*dtype, [&]<class T>(T) {
    for (std::size_t i = 0; i < p.tokens.size(); ++i) {
      const char* s = p.tokens[i].c_str();
      if constexpr (std::is_integral_v<T>) {
        t.data<T>()[i] = static_cast<T>(std::strtoll(s, nullptr, 10));
      } else if constexpr (std::is_floating_point_v<T>) {
        t.data<T>()[i] = static_cast<T>(std::strtod(s, nullptr));
      } else {
        throw std::runtime_error("no half types on the pages");
      }
    }
  });
  return t;
}

// Distance in representable float32 values.
int64_t ulps(float a, float b) {
  auto key = [](float f) {
    const auto i = std::bit_cast<int32_t>(f);
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};
  };
  return std::llabs(key(a) - key(b));
}

void expect_matches(const Tensor& got, const PageTensor& want, int64_t max_ulps) {
  const Tensor expected = to_tensor(want);
  ASSERT_EQ(got.dtype(), expected.dtype()) << want.name;
  ASSERT_EQ(got.shape(), expected.shape()) << want.name;
  visit_dtype(got.dtype(), [&]<class T>(T) {
    for (int64_t i = 0; i < got.size(); ++i) {
      if constexpr (std::is_same_v<T, float>) {
        EXPECT_LE(ulps(got.data<T>()[i], expected.data<T>()[i]), max_ulps)
            << want.name << "[" << i << "]: " << got.data<T>()[i] << " vs "
            << expected.data<T>()[i];
      } else if constexpr (std::is_arithmetic_v<T>) {
        EXPECT_EQ(got.data<T>()[i], expected.data<T>()[i]) << want.name << "[" << i << "]";
      }
    }
  });
}

std::vector<PageExample> examples(const std::string& page, const std::string& op) {
  auto all = testing::parse_page(testing::read_page(page));
  std::erase_if(all, [&](const PageExample& e) { return e.op != op; });
  return all;
}

void run_scan_examples(const std::string& page, const std::string& op, std::size_t expected) {
  const auto list = examples(page, op);
  ASSERT_EQ(list.size(), expected) << "examples found on " << page;
  for (const auto& ex : list) {
    SCOPED_TRACE(ex.test_name);
    ASSERT_EQ(ex.inputs.size(), 2u);
    ASSERT_EQ(ex.outputs.size(), 1u);
    const Tensor x = to_tensor(ex.inputs[0]);
    const Tensor axis = to_tensor(ex.inputs[1]);
    const auto get = [&](const char* k) {
      return ex.attributes.contains(k) && ex.attributes.at(k) != 0;
    };
    const ScanOptions options{.exclusive = get("exclusive"), .reverse = get("reverse")};
    const OpKind kind = op == "CumSum" ? OpKind::kCumSum : OpKind::kCumProd;
    const int64_t a = scan_axis(kind, axis);
    const Tensor y = kind == OpKind::kCumSum ? cumsum(x, a, options) : cumprod(x, a, options);
    expect_matches(y, ex.outputs[0], 0);
  }
}

TEST(SeedPages, CumSumExamples) { run_scan_examples("CumSum.txt", "CumSum", 9); }
TEST(SeedPages, CumProdExamples) { run_scan_examples("CumProd.rst", "CumProd", 9); }

TEST(SeedPages, SumExamples) {
  const auto list = examples("Sum.txt", "Sum");
  ASSERT_EQ(list.size(), 5u);
  for (const auto& ex : list) {
    SCOPED_TRACE(ex.test_name);
    std::vector<Tensor> inputs;
    for (const auto& in : ex.inputs) inputs.push_back(to_tensor(in));
    const std::vector<ConstTensorView> views(inputs.begin(), inputs.end());
    // The page's values come from float32 additions rounded after each step; cumulus rounds
    // once, so the two may differ by one unit in the last place.
    expect_matches(sum(views), ex.outputs[0], 1);
  }
}

// The worked example at the top of each scan page: x = [1, 2, 3], axis 0.
struct Opening {
  bool exclusive, reverse;
  std::vector<int32_t> cumsum, cumprod;
};

TEST(SeedPages, OpeningExamples) {
  const std::vector<Opening> cases = {
      {false, false, {1, 3, 6}, {1, 2, 6}},
      {true, false, {0, 1, 3}, {1, 1, 2}},
      {false, true, {6, 5, 3}, {6, 6, 3}},
      {true, true, {5, 3, 0}, {6, 3, 1}},
  };
  const std::vector<int32_t> values = {1, 2, 3};
  const Tensor x = Tensor::from_values<int32_t>({3}, values);
  for (const auto& c : cases) {
    const ScanOptions options{.exclusive = c.exclusive, .reverse = c.reverse};
    const Tensor s = cumsum(x, 0, options);
    const Tensor p = cumprod(x, 0, options);
    EXPECT_EQ(std::vector<int32_t>(s.values<int32_t>().begin(), s.values<int32_t>().end()),
              c.cumsum);
    EXPECT_EQ(std::vector<int32_t>(p.values<int32_t>().begin(), p.values<int32_t>().end()),
              c.cumprod);
  }
}

}  // namespace
}  // namespace cumulus
