// The README's API example, built against an installed cumulus. Exits non-zero on a wrong value.
#include <cumulus/ops.h>

#include <iostream>
#include <vector>

int main() {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  std::vector<int64_t> shape = {2, 3};
  cumulus::TensorView x{cumulus::DType::kFloat32, shape, data.data()};

  cumulus::cumsum(x, -1, x, {.exclusive = true});
  const std::vector<float> expected = {0, 1, 3, 0, 4, 9};
  if (data != expected) {
    std::cerr << "in-place exclusive cumsum gave the wrong values\n";
    return 1;
  }
  cumulus::Tensor p = cumulus::cumprod(x, 0, {.reverse = true});  // [[0, 4, 27], [0, 4, 9]]
  std::vector<cumulus::ConstTensorView> terms = {x, p};
  cumulus::Tensor s = cumulus::sum(terms);
  const std::vector<float> sums = {0, 5, 30, 0, 8, 18};
  if (!std::equal(sums.begin(), sums.end(), s.data<float>())) {
    std::cerr << "sum gave the wrong values\n";
    return 1;
  }
  try {
    cumulus::cumsum(x, 2);
  } catch (const cumulus::Error& e) {
    std::cout << "error as expected: " << e.what() << "\n";
    return 0;
  }
  return 1;
}
