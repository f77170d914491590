// Every error the kernel library raises, with its message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cumulus/ops.h"
#include "error_of.h"

namespace cumulus {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

Tensor iota_f32(Shape shape) {
  Tensor t(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = static_cast<float>(i + 1);
  return t;
}

TEST(ScanErrors, AxisOutOfRange) {
  const Tensor x = iota_f32({2, 3});
  EXPECT_THAT(
      error_of([&] { cumsum(x, 2); }),
      AllOf(HasSubstr("CumSum: axis 2 is out of range for input 'x' of rank 2 (shape [2, 3])"),
            HasSubstr("valid: [-2, 1]")));
  EXPECT_THAT(error_of([&] { cumprod(x, -3); }), HasSubstr("CumProd: axis -3 is out of range"));
}

TEST(ScanErrors, ScalarInput) {
  const Tensor x = Tensor::scalar<float>(1);
  EXPECT_THAT(error_of([&] { cumsum(x, 0); }),
              HasSubstr("CumSum: input 'x' is a scalar (rank 0), which has no axis to scan along"));
}

TEST(ScanErrors, OutputMismatch) {
  const Tensor x = iota_f32({2, 3});
  Tensor wrong_type(DType::kFloat64, {2, 3});
  Tensor wrong_shape(DType::kFloat32, {3, 2});
  EXPECT_THAT(error_of([&] { cumsum(x, 0, wrong_type.view()); }),
              HasSubstr("CumSum: output 'y' has type float64 but input 'x' has type float32"));
  EXPECT_THAT(error_of([&] { cumprod(x, 0, wrong_shape.view()); }),
              HasSubstr("CumProd: output 'y' has shape [3, 2] but input 'x' has shape [2, 3]"));
}

TEST(ScanErrors, PartialOverlap) {
  Tensor buffer = iota_f32({8});
  const Shape shape = {4};
  const ConstTensorView x(DType::kFloat32, shape, buffer.data<float>());
  const TensorView y{DType::kFloat32, shape, buffer.data<float>() + 2};
  EXPECT_THAT(error_of([&] { cumsum(x, 0, y); }),
              HasSubstr("CumSum: output 'y' partly overlaps input 'x'"));
}

TEST(ScanErrors, NegativeDimensionAndMissingData) {
  const Shape negative = {2, -1};
  const ConstTensorView x(DType::kFloat32, negative, nullptr);
  Tensor y(DType::kFloat32, {2});
  EXPECT_THAT(error_of([&] { cumsum(x, 0); }), HasSubstr("shape [2, -1] has a negative dimension"));
  const Shape shape = {2};
  const ConstTensorView no_data(DType::kFloat32, shape, nullptr);
  EXPECT_THAT(error_of([&] { cumsum(no_data, 0, y.view()); }),
              HasSubstr("CumSum: 'x' has 2 elements but no data"));
}

TEST(ScanErrors, AxisTensor) {
  const Tensor f = Tensor::scalar<float>(0);
  EXPECT_THAT(error_of([&] { scan_axis(OpKind::kCumSum, f); }),
              HasSubstr("CumSum: input 'axis' must be int32 or int64, not float32"));
  const std::vector<int64_t> two = {0, 1};
  const Tensor pair = Tensor::from_values<int64_t>({2}, two);
  EXPECT_THAT(error_of([&] { scan_axis(OpKind::kCumProd, pair); }),
              HasSubstr("CumProd: input 'axis' must be a 0-D tensor (or a 1-element 1-D tensor), "
                        "not shape [2]"));
  const std::vector<int32_t> one = {-1};
  EXPECT_EQ(scan_axis(OpKind::kCumSum, Tensor::from_values<int32_t>({1}, one)), -1);
  EXPECT_EQ(scan_axis(OpKind::kCumSum, Tensor::scalar<int64_t>(3)), 3);
}

TEST(SumErrors, Inputs) {
  EXPECT_THAT(error_of([] { sum(std::span<const ConstTensorView>{}); }),
              HasSubstr("Sum: needs at least one input"));
  const Tensor a = iota_f32({2, 3});
  const Tensor b(DType::kFloat64, {2, 3});
  const Tensor c = iota_f32({4});
  const Tensor ints(DType::kInt32, {2});
  std::vector<ConstTensorView> mixed = {a, b};
  EXPECT_THAT(
      error_of([&] { sum(mixed); }),
      HasSubstr("Sum: input 'data_1' has type float64 but input 'data_0' has type float32"));
  std::vector<ConstTensorView> clash = {a, c};
  EXPECT_THAT(error_of([&] { sum(clash); }),
              HasSubstr("Sum: input 'data_1' of shape [4] cannot be broadcast with shape [2, 3]"));
  const Tensor row = iota_f32({3});
  std::vector<ConstTensorView> broadcast = {a, row};
  EXPECT_THAT(error_of([&] { sum(broadcast, SumOptions{.broadcast = false}); }),
              HasSubstr("Sum: input 'data_1' has shape [3] but input 'data_0' has shape [2, 3]; "
                        "Sum-1 and Sum-6 do not broadcast"));
  std::vector<ConstTensorView> integers = {ints};
  EXPECT_THAT(error_of([&] { sum(integers); }),
              HasSubstr("Sum: type int32 is not supported (allowed: bfloat16, float16, float32, "
                        "float64)"));
}

TEST(SumErrors, Output) {
  Tensor a = iota_f32({2, 3});
  Tensor row = iota_f32({3});
  std::vector<ConstTensorView> inputs = {a, row};
  Tensor wrong_shape(DType::kFloat32, {3});
  Tensor wrong_type(DType::kFloat64, {2, 3});
  EXPECT_THAT(error_of([&] { sum(inputs, wrong_shape.view()); }),
              HasSubstr("Sum: output 'sum' has shape [3] but the inputs broadcast to [2, 3]"));
  EXPECT_THAT(error_of([&] { sum(inputs, wrong_type.view()); }),
              HasSubstr("Sum: output 'sum' has type float64 but the inputs have type float32"));
  Tensor small = iota_f32({1, 3});
  std::vector<ConstTensorView> onto_broadcast = {small, small};
  const Shape out = {1, 3};
  EXPECT_NO_THROW(sum(onto_broadcast, TensorView{DType::kFloat32, out, small.raw()}));
  std::vector<ConstTensorView> grow = {a, small};
  EXPECT_THAT(
      error_of([&] {
        sum(grow, TensorView{DType::kFloat32, a.shape(), small.raw()});
      }),
      HasSubstr("Sum: output 'sum' shares its buffer with input 'data_1', which is broadcast"));
}

TEST(TensorErrors, Sizes) {
  const Shape huge = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_THAT(error_of([&] { element_count(huge); }, ErrorCode::kLimit),
              HasSubstr("has more elements than fit in 64 bits"));
  const Shape big = {int64_t{1} << 59, 8};
  EXPECT_THAT(error_of([&] { Tensor t(DType::kFloat64, big); }, ErrorCode::kLimit),
              HasSubstr("needs more bytes than fit in 64 bits"));
  const std::vector<float> three = {1, 2, 3};
  EXPECT_THAT(error_of([&] { Tensor::from_values<float>({2}, three); }),
              HasSubstr("tensor of 2 elements given 3 values"));
}

TEST(TensorErrors, MemoryLimit) {
  // Two small inputs that broadcast to 4 TiB: refused before any allocation, with the size.
  const Tensor column = iota_f32({int64_t{1} << 20, 1});
  const Tensor row = iota_f32({1, int64_t{1} << 20});
  const std::vector<ConstTensorView> inputs = {column, row};
  const auto saved = memory_limit();
  set_memory_limit(std::size_t{1} << 40);
  EXPECT_THAT(error_of([&] { sum(inputs); }, ErrorCode::kLimit),
              AllOf(HasSubstr("a float32 tensor of shape [1048576, 1048576] needs 4398046511104 "
                              "bytes (4.0 TiB), more than the memory limit of 1099511627776 "
                              "bytes (1.0 TiB)"),
                    HasSubstr("CUMULUS_MEMORY_LIMIT")));
  set_memory_limit(std::size_t{1} << 20);
  EXPECT_NO_THROW(Tensor(DType::kFloat32, {int64_t{1} << 18}));  // exactly at the limit
  EXPECT_THAT(
      error_of([&] { Tensor t(DType::kFloat32, {(int64_t{1} << 18) + 1}); }, ErrorCode::kLimit),
      HasSubstr("a float32 tensor of shape [262145] needs 1048580 bytes (1.0 MiB), more "
                "than the memory limit of 1048576 bytes (1.0 MiB)"));
  set_memory_limit(saved);
  EXPECT_EQ(memory_limit(), saved);
}

TEST(TensorErrors, AllocationFailure) {
  // 128 TiB is more address space than a process has: with the memory limit above it, the
  // allocation itself fails.
  const auto saved = memory_limit();
  set_memory_limit(SIZE_MAX);
  EXPECT_EQ(error_of([&] { Tensor t(DType::kFloat64, {int64_t{1} << 44}); }, ErrorCode::kLimit),
            "cannot allocate 140737488355328 bytes for a float64 tensor of shape [17592186044416]");
  set_memory_limit(saved);
}

}  // namespace
}  // namespace cumulus

// AddressSanitizer's allocator must fail as the system's does, not abort, for the allocation
// failure tested above.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

namespace cumulus {
namespace {

// The best instruction set this CPU has, read from the kernel's /proc/cpuinfo flags rather than
// from CPUID as dispatch.cc does, so a wrong test in dispatch.cc cannot hide here.
std::string best_isa_from_cpuinfo() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!line.starts_with("flags")) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  EXPECT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  auto has = [&](std::initializer_list<const char*> names) {
    return std::ranges::all_of(names, [&](const char* n) { return flags.contains(n); });
  };
  if (has({"avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512_fp16"})) return "avx512fp16";
  if (has({"avx512f", "avx512vl", "avx512bw", "avx512dq"})) return "avx512";
  if (has({"avx2", "fma", "f16c"})) return "avx2";
  return "scalar";
}

// The default run must use the best set the CPU has, and each CUMULUS_ISA rerun the set it names
// (or the best, where the CPU has less): a fallback to a lower set fails here.
TEST(Dispatch, UsesTheBestSetUpToCumulusIsa) {
  const std::vector<std::string> order = {"scalar", "avx2", "avx512", "avx512fp16"};
  const std::string best = best_isa_from_cpuinfo();
  const char* forced = std::getenv("CUMULUS_ISA");
  std::string want = best;
  if (forced != nullptr && *forced != '\0') {
    const auto cap = std::ranges::find(order, forced);
    ASSERT_TRUE(cap != order.end()) << "CUMULUS_ISA=" << forced;
    want = *std::min(cap, std::ranges::find(order, best));
  }
  EXPECT_EQ(kernel_isa(), want) << "best in /proc/cpuinfo: " << best
                                << ", CUMULUS_ISA=" << (forced ? forced : "(unset)");
}

// In a fresh process (the threadsafe style re-executes this test alone), as the table is chosen
// once per process: an unknown name is reported by every call, never taken as "no cap".
TEST(Dispatch, UnknownCumulusIsaIsAnError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("CUMULUS_ISA", "bogus", 1);
        const Tensor x = iota_f32({3});
        for (int call = 0; call < 2; ++call) {
          try {
            cumsum(x, 0);
          } catch (const Error& e) {
            if (e.code() != ErrorCode::kInvalidArgument) std::_Exit(2);
            std::fprintf(stderr, "%s\n", e.what());
            continue;
          }
          std::_Exit(1);
        }
        std::_Exit(3);
      },
      ::testing::ExitedWithCode(3),
      "CUMULUS_ISA=\"bogus\" is not an instruction set; valid: scalar, avx2, avx512, avx512fp16 "
      "\\(or unset, for the best this CPU has\\)\n.*is not an instruction set");
}

}  // namespace
}  // namespace cumulus
