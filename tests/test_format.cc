// The NumPy-style printing of tools/cli/format.h. The operator pages in CUMULUS_SEEDS_DIR are the
// reference: every printed block is parsed back into a tensor from its own text and must print
// the same. The hand-written cases are NumPy 1.24's np.array2string(a, separator=", ").
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cumulus/dtype.h"
#include "cumulus/onnx.h"
#include "cumulus/tensor.h"
#include "format.h"

namespace {

using cumulus::BFloat16;
using cumulus::DType;
using cumulus::Float16;
using cumulus::Shape;
using cumulus::Tensor;
using cumulus::cli::format_array;
using cumulus::cli::format_named;
using cumulus::onnx::shape_tuple;

template <class T>
Tensor tensor(Shape shape, const std::vector<T>& values) {
  return Tensor::from_values<T>(std::move(shape), values);
}

template <class T>
std::string print(Shape shape, const std::vector<T>& values) {
  return format_array(tensor(std::move(shape), values));
}

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- The operator pages ----

// One "name: shape=..., dtype=..." block of a page and the array lines under it.
struct Block {
  int indent = 0;
  std::string name;
  std::string dtype;
  Shape shape;
  std::string text;                 // header and array lines as printed, each ending in '\n'
  std::vector<std::string> tokens;  // the numbers of the array lines
};

std::size_t indent_of(const std::string& line) { return line.find_first_not_of(' '); }

std::vector<Block> read_blocks(const std::string& page) {
  std::ifstream in(std::string(CUMULUS_SEEDS_DIR) + "/" + page);
  EXPECT_TRUE(in) << "cannot read " << page;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);

  static const std::regex header_line(R"(^( *)(\w+): shape=\(([^)]*)\), dtype=(\w+)$)");
  std::vector<Block> blocks;
  std::smatch m;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!std::regex_match(lines[i], m, header_line)) continue;
    Block b;
    b.indent = static_cast<int>(m.length(1));
    b.name = m[2];
    b.dtype = m[4];
    const std::string dims = m[3];
    for (const char* p = dims.c_str(); *p != '\0';) {
      char* end = nullptr;
      b.shape.push_back(std::strtoll(p, &end, 10));
      p = end;
      while (*p == ',' || *p == ' ') ++p;
    }
    // The array runs on while lines are blank (between the blocks of a 3-D array) or indented
    // deeper than the header.
    std::size_t end = i + 1;
    while (end < lines.size() &&
           (lines[end].empty() || indent_of(lines[end]) > static_cast<std::size_t>(b.indent))) {
      ++end;
    }
    while (lines[end - 1].empty()) --end;
    for (std::size_t j = i; j < end; ++j) {
      b.text += lines[j] + "\n";
      if (j == i) continue;
      std::string cleaned = lines[j];
      for (char& c : cleaned) {
        if (c == '[' || c == ']' || c == ',') c = ' ';
      }
      std::istringstream words(cleaned);
      for (std::string w; words >> w;) b.tokens.push_back(w);
    }
    blocks.push_back(std::move(b));
    i = end - 1;
  }
  return blocks;
}

template <class T, class Parse>
Tensor parse_tensor(const Block& b, Parse parse) {
  std::vector<T> values;
  for (const std::string& token : b.tokens) {
    char* end = nullptr;
    errno = 0;
    values.push_back(static_cast<T>(parse(token.c_str(), &end)));
    EXPECT_TRUE(errno == 0 && *end == '\0') << "bad number '" << token << "' in " << b.name;
  }
  return tensor(b.shape, values);
}

Tensor parse_tensor(const Block& b) {
  const auto dtype = cumulus::dtype_from_name(b.dtype);
  EXPECT_TRUE(dtype.has_value()) << b.dtype;
  const auto to_integer = [](const char* s, char** end) { return std::strtoll(s, end, 10); };
  switch (dtype.value_or(DType::kFloat64)) {
    case DType::kFloat32:
      return parse_tensor<float>(b, std::strtof);
    case DType::kFloat64:
      return parse_tensor<double>(b, std::strtod);
    case DType::kInt32:
      return parse_tensor<int32_t>(b, to_integer);
    case DType::kInt64:
      return parse_tensor<int64_t>(b, to_integer);
    default:
      ADD_FAILURE() << "the pages print no " << b.dtype;
      return {};
  }
}

// Prints every block of a page from the numbers in it; returns the dtypes seen.
std::set<std::string> check_page(const std::string& page, std::size_t expected_blocks) {
  const std::vector<Block> blocks = read_blocks(page);
  EXPECT_EQ(blocks.size(), expected_blocks) << page;
  std::set<std::string> dtypes;
  for (const Block& b : blocks) {
    SCOPED_TRACE(page + ": " + b.text);
    const Tensor t = parse_tensor(b);
    EXPECT_EQ(static_cast<std::size_t>(t.size()), b.tokens.size());
    EXPECT_EQ(format_named(b.name, t, b.indent), b.text);
    dtypes.insert(b.dtype);
  }
  return dtypes;
}

TEST(SeedPages, CumSumBlocksPrintAsOnThePage) {
  EXPECT_EQ(check_page("CumSum.txt", 27), (std::set<std::string>{"float64", "int32", "int64"}));
}

TEST(SeedPages, CumProdBlocksPrintAsOnThePage) {
  // The rst page indents its code blocks by four more spaces.
  EXPECT_EQ(check_page("CumProd.rst", 27), (std::set<std::string>{"float64", "int32", "int64"}));
}

TEST(SeedPages, SumBlocksPrintAsOnThePage) {
  EXPECT_EQ(check_page("Sum.txt", 16), std::set<std::string>{"float32"});
}

TEST(SeedPages, SumPageHasTheFormsThatMatter) {
  // Guards the extraction: the blocks that exercise padding, wrapping and exponent notation.
  const std::vector<Block> blocks = read_blocks("Sum.txt");
  int three_d = 0;
  int exponent = 0;
  int scalar = 0;
  for (const Block& b : blocks) {
    three_d += b.shape == Shape{3, 4, 5} ? 1 : 0;
    exponent += b.text.find("e-01,") != std::string::npos ? 1 : 0;
    scalar += b.shape.empty() ? 1 : 0;
  }
  EXPECT_EQ(three_d, 4);
  EXPECT_EQ(exponent, 1);
  EXPECT_EQ(scalar, 1);
}

// ---- Shapes and blocks ----

TEST(Format, ShapeLikeNumpyTuples) {
  EXPECT_EQ(shape_tuple({}), "()");
  EXPECT_EQ(shape_tuple(Shape{5}), "(5,)");
  EXPECT_EQ(shape_tuple(Shape{2, 3}), "(2, 3)");
  EXPECT_EQ(shape_tuple(Shape{2, 0, 4}), "(2, 0, 4)");
}

TEST(Format, NamedBlockIndentsArrayLinesButNotBlankOnes) {
  const Tensor t = tensor<double>({2, 1, 2}, {1, 2, 3, 4});
  EXPECT_EQ(format_named("x", t, 2),
            "  x: shape=(2, 1, 2), dtype=float64\n"
            "    [[[1., 2.]],\n"
            "\n"
            "     [[3., 4.]]]\n");
  EXPECT_EQ(format_named("s", Tensor::scalar<int32_t>(0), 0), "s: shape=(), dtype=int32\n  0\n");
}

TEST(Format, RankZeroIsTheBareValue) {
  EXPECT_EQ(format_array(Tensor::scalar<int32_t>(0)), "0");
  EXPECT_EQ(format_array(Tensor::scalar<float>(10)), "10.");
  EXPECT_EQ(format_array(Tensor::scalar<double>(-2.5)), "-2.5");
  EXPECT_EQ(format_array(Tensor::scalar<double>(1e-5)), "1.e-05");
}

TEST(Format, EmptyArraysPrintAsEmptyBrackets) {
  EXPECT_EQ(print<float>({0}, {}), "[]");
  EXPECT_EQ(print<double>({2, 0}, {}), "[]");
  EXPECT_EQ(print<int64_t>({0, 3, 2}, {}), "[]");
  EXPECT_EQ(format_named("e", tensor<float>({2, 0}, {}), 0),
            "e: shape=(2, 0), dtype=float32\n  []\n");
}

TEST(Format, NestsEveryRank) {
  EXPECT_EQ(print<double>({1, 1, 1, 2}, {1, 1}), "[[[[1., 1.]]]]");
  EXPECT_EQ(print<int32_t>({2, 2, 1, 1}, {1, 2, 3, 4}),
            "[[[[1]],\n\n  [[2]]],\n\n\n [[[3]],\n\n  [[4]]]]");
}

// ---- Integers ----

TEST(Format, IntegersRightAlignedToTheWidest) {
  EXPECT_EQ(print<int32_t>({5}, {0, 1, 3, 6, 10}), "[ 0,  1,  3,  6, 10]");
  EXPECT_EQ(print<int32_t>({3}, {-5, 20, 3}), "[-5, 20,  3]");
  EXPECT_EQ(print<uint32_t>({2}, {4294967295u, 0}), "[4294967295,          0]");
}

TEST(Format, Uint64MaxAndInt64Min) {
  EXPECT_EQ(print<uint64_t>({1}, {std::numeric_limits<uint64_t>::max()}), "[18446744073709551615]");
  EXPECT_EQ(print<int64_t>({2}, {std::numeric_limits<int64_t>::min(), 5}),
            "[-9223372036854775808,                    5]");
}

// ---- Floats ----

TEST(Format, PositionalPadsTheFractionWithSpaces) {
  EXPECT_EQ(print<double>({3}, {1.5, 2, -0.25}), "[ 1.5 ,  2.  , -0.25]");
  EXPECT_EQ(print<double>({2}, {-0.0, 1}), "[-0.,  1.]");
  EXPECT_EQ(print<float>({2}, {0.1f, 1.52345678f}), "[0.1      , 1.5234568]");
}

TEST(Format, PrecisionEightRoundsAwayTheBinaryNoise) {
  EXPECT_EQ(print<double>({1}, {0.1 + 0.2}), "[0.3]");
  EXPECT_EQ(print<double>({2}, {1.0000000001, 2}), "[1., 2.]");
  EXPECT_EQ(print<double>({2}, {0.1, 1.52345678}), "[0.1       , 1.52345678]");
  // Cut at eight digits, ties to even, from the exact binary value.
  EXPECT_EQ(print<double>({2}, {0.001953125, 0.005859375}), "[0.00195312, 0.00585938]");
}

TEST(Format, LargeValuesSwitchToExponentNotation) {
  EXPECT_EQ(print<double>({2}, {0, 1e8}), "[0.e+00, 1.e+08]");
  EXPECT_EQ(print<double>({2}, {1, 99999999}), "[1.0000000e+00, 9.9999999e+07]");
  EXPECT_EQ(print<double>({2}, {1e300, 1e-300}), "[1.e+300, 1.e-300]");
}

TEST(Format, TinyValuesSwitchToExponentNotation) {
  EXPECT_EQ(print<double>({2}, {1e-5, 1}), "[1.e-05, 1.e+00]");
  // float32(1e-4) is just below 1e-4, and NumPy compares with the double 1e-4.
  EXPECT_EQ(print<float>({1}, {1e-4f}), "[1.e-04]");
}

TEST(Format, RangeOverAThousandSwitchesToExponentNotation) {
  EXPECT_EQ(print<double>({3}, {0.25, 0.5, 1000}), "[2.5e-01, 5.0e-01, 1.0e+03]");
  EXPECT_EQ(print<double>({3}, {0.25, 0.5, 1000.5}), "[2.5000e-01, 5.0000e-01, 1.0005e+03]");
  // The ratio is taken in float32: 1908.7238 / 1.9087237 rounds to exactly 1000.
  EXPECT_EQ(print<float>({2}, {1.9087237f, 1908.7238f}), "[   1.9087237, 1908.7238   ]");
}

TEST(Format, ExponentNotationPrintsTheExactDigitsToTheCommonPrecision) {
  // float32 1e-5 is 9.99999974e-06: the extra digits are the value's own, not zeros.
  EXPECT_EQ(print<float>({3}, {0.1f, 1e-5f, 1.2345678f}),
            "[1.0000000e-01, 9.9999997e-06, 1.2345678e+00]");
}

TEST(Format, NanAndInfinityAmongFiniteValues) {
  EXPECT_EQ(print<double>({3}, {kNan, 1.5, -kInf}), "[ nan,  1.5, -inf]");
  EXPECT_EQ(print<double>({2}, {kNan, kInf}), "[nan, inf]");
  EXPECT_EQ(print<double>({3}, {kNan, 1e-5, -kInf}), "[   nan, 1.e-05,   -inf]");
  EXPECT_EQ(print<float>({1}, {-std::numeric_limits<float>::quiet_NaN()}), "[nan]");
}

TEST(Format, Float16UsesItsOwnShortestDigits) {
  // Bit patterns: 0.1 is 0.0999755859375, 1.5, 65504 (the largest), -2, 4112, 5.
  const Float16 tenth{0x2E66}, one_and_half{0x3E00}, largest{0x7BFF}, minus_two{0xC000};
  EXPECT_EQ(print<Float16>({1}, {tenth}), "[0.1]");
  EXPECT_EQ(format_array(Tensor::scalar(tenth)), "0.1");
  EXPECT_EQ(print<Float16>({4}, {tenth, one_and_half, largest, minus_two}),
            "[ 1.00e-01,  1.50e+00,  6.55e+04, -2.00e+00]");
  // Positional notation prints every digit before the point: 4112., where the shortest
  // unique digits alone would give 4110.
  EXPECT_EQ(print<Float16>({2}, {Float16{0x6C04}, Float16{0x4500}}), "[4112.,    5.]");
  // Exponent notation: the ratio 1001 / 1.0009766 is 1000 once rounded to float16.
  EXPECT_EQ(print<Float16>({2}, {Float16{0x3C01}, Float16{0x63D2}}), "[   1.001, 1001.   ]");
  // 1e-5 is 1.0013580322265625e-05 in float16.
  EXPECT_EQ(print<Float16>({3}, {tenth, Float16{0x00A8}, Float16{0x3D00}}),
            "[1.00e-01, 1.00e-05, 1.25e+00]");
}

TEST(Format, BFloat16UsesItsOwnShortestDigits) {
  // 0.10009765625, 0.333984375 and 3.140625: the gaps of an 8-bit significand leave few digits.
  EXPECT_EQ(print<BFloat16>({3}, {BFloat16{0x3DCD}, BFloat16{0x3EAB}, BFloat16{0x4049}}),
            "[0.1  , 0.334, 3.14 ]");
  // The largest, 3.3895313892515355e+38, and 9999220736.
  EXPECT_EQ(format_array(Tensor::scalar(BFloat16{0x7F7F})), "3.39e+38");
  EXPECT_EQ(format_array(Tensor::scalar(BFloat16{0x5015})), "1.e+10");
  EXPECT_EQ(print<BFloat16>(
                {4}, {BFloat16{0x7FC0}, BFloat16{0x3FC0}, BFloat16{0xFF80}, BFloat16{0x8000}}),
            "[ nan,  1.5, -inf, -0. ]");
}

// ---- Layout ----

TEST(Format, LongRowsWrapAtSeventyFiveColumns) {
  std::vector<double> v(25);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1.5 * static_cast<double>(i);
  EXPECT_EQ(print<double>({25}, v),
            "[ 0. ,  1.5,  3. ,  4.5,  6. ,  7.5,  9. , 10.5, 12. , 13.5, 15. , 16.5,\n"
            " 18. , 19.5, 21. , 22.5, 24. , 25.5, 27. , 28.5, 30. , 31.5, 33. , 34.5,\n"
            " 36. ]");
}

TEST(Format, SummarisesAVectorOfTwoThousand) {
  std::vector<double> v(2000);
  std::iota(v.begin(), v.end(), 0.0);
  // Only the six printed values choose the notation and widths.
  EXPECT_EQ(print<double>({2000}, v),
            "[0.000e+00, 1.000e+00, 2.000e+00, ..., 1.997e+03, 1.998e+03, 1.999e+03]");
  std::vector<int32_t> n(2000);
  std::iota(n.begin(), n.end(), 0);
  EXPECT_EQ(print<int32_t>({2000}, n), "[   0,    1,    2, ..., 1997, 1998, 1999]");
}

TEST(Format, ExactlyAThousandElementsAreNotSummarised) {
  std::vector<int32_t> n(1000, 7);
  const std::string text = print<int32_t>({1000}, n);
  EXPECT_EQ(text.find("..."), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '7'), 1000);
}

TEST(Format, SummarisesAHundredByHundredMatrix) {
  std::vector<int32_t> n(10000);
  std::iota(n.begin(), n.end(), 0);
  EXPECT_EQ(print<int32_t>({100, 100}, n),
            "[[   0,    1,    2, ...,   97,   98,   99],\n"
            " [ 100,  101,  102, ...,  197,  198,  199],\n"
            " [ 200,  201,  202, ...,  297,  298,  299],\n"
            " ...,\n"
            " [9700, 9701, 9702, ..., 9797, 9798, 9799],\n"
            " [9800, 9801, 9802, ..., 9897, 9898, 9899],\n"
            " [9900, 9901, 9902, ..., 9997, 9998, 9999]]");
  std::vector<double> v(10000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) / 4;
  EXPECT_EQ(print<double>({100, 100}, v),
            "[[0.00000e+00, 2.50000e-01, 5.00000e-01, ..., 2.42500e+01, 2.45000e+01,\n"
            "  2.47500e+01],\n"
            " [2.50000e+01, 2.52500e+01, 2.55000e+01, ..., 4.92500e+01, 4.95000e+01,\n"
            "  4.97500e+01],\n"
            " [5.00000e+01, 5.02500e+01, 5.05000e+01, ..., 7.42500e+01, 7.45000e+01,\n"
            "  7.47500e+01],\n"
            " ...,\n"
            " [2.42500e+03, 2.42525e+03, 2.42550e+03, ..., 2.44925e+03, 2.44950e+03,\n"
            "  2.44975e+03],\n"
            " [2.45000e+03, 2.45025e+03, 2.45050e+03, ..., 2.47425e+03, 2.47450e+03,\n"
            "  2.47475e+03],\n"
            " [2.47500e+03, 2.47525e+03, 2.47550e+03, ..., 2.49925e+03, 2.49950e+03,\n"
            "  2.49975e+03]]");
}

TEST(Format, SummaryRowsOfAThreeDArrayKeepTheBlankLines) {
  std::vector<int64_t> n(1600);
  std::iota(n.begin(), n.end(), 0);
  EXPECT_EQ(print<int64_t>({8, 2, 100}, n),
            "[[[   0,    1,    2, ...,   97,   98,   99],\n"
            "  [ 100,  101,  102, ...,  197,  198,  199]],\n"
            "\n"
            " [[ 200,  201,  202, ...,  297,  298,  299],\n"
            "  [ 300,  301,  302, ...,  397,  398,  399]],\n"
            "\n"
            " [[ 400,  401,  402, ...,  497,  498,  499],\n"
            "  [ 500,  501,  502, ...,  597,  598,  599]],\n"
            "\n"
            " ...,\n"
            "\n"
            " [[1000, 1001, 1002, ..., 1097, 1098, 1099],\n"
            "  [1100, 1101, 1102, ..., 1197, 1198, 1199]],\n"
            "\n"
            " [[1200, 1201, 1202, ..., 1297, 1298, 1299],\n"
            "  [1300, 1301, 1302, ..., 1397, 1398, 1399]],\n"
            "\n"
            " [[1400, 1401, 1402, ..., 1497, 1498, 1499],\n"
            "  [1500, 1501, 1502, ..., 1597, 1598, 1599]]]");
}

}  // namespace
