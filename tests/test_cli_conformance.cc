// `cumulus test` judged on folders made here, with expected outputs placed just inside and just
// outside its tolerances (rtol 1e-3, atol 1e-7 on floating types, as the ONNX backend runner;
// integers exactly), so a change to any of them changes a PASS into a FAIL or back.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "model_builder.h"

namespace cumulus {
namespace {

namespace fs = std::filesystem;
using namespace model_builder;

using cli_runner::cli;
using cli_runner::read_all;
using cli_runner::Result;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream s(text);
  for (std::string line; std::getline(s, line);) lines.push_back(line);
  return lines;
}

void write_proto(const fs::path& path, const ::onnx::TensorProto& t) {
  std::string bytes;
  ASSERT_TRUE(t.SerializeToString(&bytes));
  ModelBuilder::write_bytes(path, bytes);
}

// A backend test folder whose model passes its input through unchanged (CumSum along an axis of
// length 1), so what it outputs is exactly the input; each data set holds that input and the
// expected output given.
template <class T>
void write_case(const fs::path& dir, const std::vector<T>& got,
                const std::vector<::onnx::TensorProto>& expected) {
  const auto n = static_cast<int64_t>(got.size());
  fs::create_directories(dir);
  ModelBuilder m(14);
  m.input("x", elem_type_of<T>(), std::vector<Dim>{1, n})
      .initializer(scalar_proto<int64_t>("axis", 0))
      .output("y", elem_type_of<T>(), std::vector<Dim>{1, n});
  m.node("CumSum", {"x", "axis"}, {"y"});
  m.write(dir / "model.onnx");
  for (std::size_t s = 0; s < expected.size(); ++s) {
    const fs::path set = dir / fmt::format("test_data_set_{}", s);
    fs::create_directories(set);
    write_proto(set / "input_0.pb", tensor_proto<T>("x", {1, n}, got));
    write_proto(set / "output_0.pb", expected[s]);
  }
}

template <class T>
::onnx::TensorProto row(const std::vector<T>& values) {
  return tensor_proto<T>("y", {1, static_cast<int64_t>(values.size())}, values);
}

// The line `cumulus test` prints for a case whose one data set differs from what the model gives.
std::string differs(const std::string& name, int bad, int of, int first, double got,
                    double expected, bool integral = false) {
  return fmt::format(
      "FAIL {}: test_data_set_0: output 'y' differs at {} of {} elements; first at [0, {}]: got "
      "{}, expected {} ({})",
      name, bad, of, first, got, expected,
      integral ? "integers must match exactly" : "rtol 1e-3, atol 1e-7");
}

std::string passes(const std::string& name, int sets = 1) {
  return fmt::format("PASS {} ({} data set{})", name, sets, sets == 1 ? "" : "s");
}

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class CliConformance : public ::testing::Test {
 protected:
  // Runs `cumulus test` on the folder of all cases written and checks every line it prints,
  // the summary and the exit status.
  void expect_lines(const std::vector<std::string>& want, int passed, int failed) {
    const Result r = cli({"test", dir_.path().string()});
    EXPECT_EQ(r.status, failed == 0 ? 0 : 1) << r.out << r.err;
    EXPECT_EQ(r.err, "");
    std::vector<std::string> all = want;
    // The cases run in the order of their names, which follow "PASS " or "FAIL ".
    auto name = [](const std::string& line) {
      return line.substr(5, line.find_first_of(" :", 5) - 5);
    };
    std::sort(all.begin(), all.end(),
              [&](const std::string& a, const std::string& b) { return name(a) < name(b); });
    all.push_back(fmt::format("{} passed, {} failed", passed, failed));
    EXPECT_THAT(lines_of(r.out), ::testing::ElementsAreArray(all)) << r.out;
  }
  fs::path at(const std::string& name) const { return dir_ / name; }

  TempDir dir_;
};

TEST_F(CliConformance, Float64Tolerances) {
  // |got - expected| <= 1e-7 + 1e-3 * |expected|: 1.0000001 at 1000, 1e-7 at 0.
  write_case<double>(at("rtol_inside"), {1001.0000000999, -1001.0000000999, 999.0000001},
                     {row<double>({1000, -1000, 1000})});
  write_case<double>(at("rtol_outside"), {1000, 1001.0000001001, -998.9999998999},
                     {row<double>({1000, 1000, -1000})});
  // The relative part scales with the expected value, not the output: 1001.0005 is within 1e-3
  // of itself but not of 1000.
  write_case<double>(at("rtol_of_expected"), {1001.0005}, {row<double>({1000})});
  write_case<double>(at("atol_inside"), {0.99e-7, -0.99e-7, 1e-7}, {row<double>({0, 0, 0})});
  write_case<double>(at("atol_outside"), {0, 1.01e-7, -1.01e-7}, {row<double>({0, 0, 0})});
  expect_lines({passes("rtol_inside"), differs("rtol_outside", 2, 3, 1, 1001.0000001001, 1000),
                differs("rtol_of_expected", 1, 1, 0, 1001.0005, 1000), passes("atol_inside"),
                differs("atol_outside", 2, 3, 1, 1.01e-7, 0)},
               2, 3);
}

TEST_F(CliConformance, Float32AndFloat16Tolerances) {
  // Compared after widening to double: float32 1e-7 is 1.00000001e-7, just beyond atol, and
  // 1001 + 2^-14 (the next float32) just beyond rtol at 1000.
  write_case<float>(at("f32_inside"), {1001.0f, 0.99e-7f}, {row<float>({1000.0f, 0.0f})});
  write_case<float>(at("f32_rtol_outside"), {1000.0f, std::nextafter(1001.0f, 2000.0f)},
                    {row<float>({1000.0f, 1000.0f})});
  write_case<float>(at("f32_atol_outside"), {1e-7f}, {row<float>({0.0f})});
  // float16 bit patterns: 0x63D0 = 1000, 0x63D2 = 1001, 0x63D3 = 1001.5.
  write_case<Float16>(at("f16_inside"), {Float16{0x63D2}}, {row<Float16>({Float16{0x63D0}})});
  write_case<Float16>(at("f16_outside"), {Float16{0x63D3}}, {row<Float16>({Float16{0x63D0}})});
  expect_lines({passes("f32_inside"),
                differs("f32_rtol_outside", 1, 2, 1, std::nextafter(1001.0f, 2000.0f), 1000),
                differs("f32_atol_outside", 1, 1, 0, 1e-7f, 0), passes("f16_inside"),
                differs("f16_outside", 1, 1, 0, 1001.5, 1000)},
               2, 3);
}

TEST_F(CliConformance, NanAndInfinity) {
  write_case<double>(at("nan_matches_nan"), {kNan, 1, -kNan}, {row<double>({kNan, 1, kNan})});
  write_case<double>(at("nan_for_number"), {1, kNan}, {row<double>({1, 1})});
  write_case<double>(at("number_for_nan"), {1, 2}, {row<double>({1, kNan})});
  write_case<float>(at("inf_matches_inf"), {INFINITY, -INFINITY},
                    {row<float>({INFINITY, -INFINITY})});
  write_case<double>(at("inf_for_minus_inf"), {kInf}, {row<double>({-kInf})});
  write_case<double>(at("max_for_inf"), {std::numeric_limits<double>::max()},
                     {row<double>({kInf})});
  write_case<double>(at("inf_for_max"), {kInf},
                     {row<double>({std::numeric_limits<double>::max()})});
  expect_lines({passes("nan_matches_nan"), differs("nan_for_number", 1, 2, 1, kNan, 1),
                differs("number_for_nan", 1, 2, 1, 2, kNan), passes("inf_matches_inf"),
                differs("inf_for_minus_inf", 1, 1, 0, kInf, -kInf),
                differs("max_for_inf", 1, 1, 0, std::numeric_limits<double>::max(), kInf),
                differs("inf_for_max", 1, 1, 0, kInf, std::numeric_limits<double>::max())},
               2, 5);
}

TEST_F(CliConformance, IntegersMatchExactly) {
  constexpr int64_t k2p53 = int64_t{1} << 53;  // 2^53 + 1 widens to the same double as 2^53
  write_case<int64_t>(at("int64_equal"), {-3, 0, k2p53 + 1, std::numeric_limits<int64_t>::min()},
                      {row<int64_t>({-3, 0, k2p53 + 1, std::numeric_limits<int64_t>::min()})});
  // Off by one where rtol 1e-3 would let it pass, and where double cannot tell.
  write_case<int64_t>(at("int64_off_by_one"), {1000000, 7, k2p53 + 1},
                      {row<int64_t>({1000001, 7, k2p53})});
  write_case<int32_t>(at("int32_off_by_one"), {-5, 100000}, {row<int32_t>({-5, 100001})});
  const uint64_t big = uint64_t{1} << 63;
  write_case<uint64_t>(at("uint64_off_by_one"), {big + 1}, {row<uint64_t>({big})});
  write_case<uint32_t>(at("uint32_off_by_one"), {4294967295u}, {row<uint32_t>({4294967294u})});
  expect_lines({passes("int64_equal"), differs("int64_off_by_one", 2, 3, 0, 1000000, 1000001, true),
                differs("int32_off_by_one", 1, 2, 1, 100000, 100001, true),
                differs("uint64_off_by_one", 1, 1, 0, static_cast<double>(big + 1),
                        static_cast<double>(big), true),
                differs("uint32_off_by_one", 1, 1, 0, 4294967295.0, 4294967294.0, true)},
               1, 4);
}

TEST_F(CliConformance, WrongTypeShapeOrFile) {
  // The same values as another type or another shape are still wrong.
  write_case<float>(at("wrong_type"), {1, 2}, {tensor_proto<double>("y", {1, 2}, {1, 2})});
  write_case<int64_t>(at("wrong_int_type"), {1, 2}, {tensor_proto<int32_t>("y", {1, 2}, {1, 2})});
  write_case<float>(at("wrong_shape"), {1, 2, 3, 4},
                    {tensor_proto<float>("y", {2, 2}, {1, 2, 3, 4})});
  write_case<float>(at("wrong_rank"), {1, 2}, {tensor_proto<float>("y", {2}, {1, 2})});
  write_case<float>(at("missing_output"), {1}, {row<float>({1})});
  fs::remove(at("missing_output") / "test_data_set_0" / "output_0.pb");
  expect_lines({"FAIL wrong_type: test_data_set_0: output 'y' has type float32, expected float64",
                "FAIL wrong_int_type: test_data_set_0: output 'y' has type int64, expected int32",
                "FAIL wrong_shape: test_data_set_0: output 'y' has shape [1, 4], expected [2, 2]",
                "FAIL wrong_rank: test_data_set_0: output 'y' has shape [1, 2], expected [2]",
                "FAIL missing_output: test_data_set_0: missing output_0.pb"},
               0, 5);
}

TEST_F(CliConformance, EveryDataSetCounts) {
  write_case<double>(at("two_sets"), {1, 2}, {row<double>({1, 2}), row<double>({1.0005, 2})});
  // The second set fails though the first passes, and is the one named.
  write_case<double>(at("second_set_fails"), {1, 2}, {row<double>({1, 2}), row<double>({1, 3})});
  expect_lines({passes("two_sets", 2),
                "FAIL second_set_fails: test_data_set_1: output 'y' differs at 1 of 2 elements; "
                "first at [0, 1]: got 2, expected 3 (rtol 1e-3, atol 1e-7)"},
               1, 1);
}

TEST_F(CliConformance, AllPassingExitsZero) {
  write_case<double>(at("a"), {1, 2}, {row<double>({1, 2})});
  write_case<float>(at("b"), {kNan}, {row<float>({NAN})});
  expect_lines({passes("a"), passes("b")}, 2, 0);
}

// A CUMULUS_ISA that names no instruction set stops the run with one line, before any case
// runs, rather than choosing some kernels silently or failing every case on its own.
TEST_F(CliConformance, UnknownCumulusIsaIsOneError) {
  write_case<double>(at("a"), {1, 2}, {row<double>({1, 2})});
  const std::string message =
      "error: CUMULUS_ISA=\"bogus\" is not an instruction set; valid: scalar, avx2, avx512, "
      "avx512fp16 (or "
      "unset, for the best this CPU has)\n";
  const Result test = cli({"test", dir_.path().string()}, "CUMULUS_ISA=bogus");
  EXPECT_EQ(test.status, 1);
  EXPECT_EQ(test.out, "");
  EXPECT_EQ(test.err, message);
  const Result run = cli({"run", (at("a") / "model.onnx").string(), "--input", "x=random:1x2"},
                         "CUMULUS_ISA=bogus");
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, message);
  // Each valid name, and none, runs the case.
  for (const char* env : {"CUMULUS_ISA=scalar", "CUMULUS_ISA=avx2", "CUMULUS_ISA=avx512",
                          "CUMULUS_ISA=avx512fp16", "CUMULUS_ISA="}) {
    const Result ok = cli({"test", dir_.path().string()}, env);
    EXPECT_EQ(ok.status, 0) << env << ": " << ok.err;
    EXPECT_EQ(ok.out, "PASS a (1 data set)\n1 passed, 0 failed\n") << env;
  }
}

}  // namespace
}  // namespace cumulus
