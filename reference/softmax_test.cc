#include "reference/softmax.h"

#include <gtest/gtest.h>

#include <cmath>

#include "harness/compare.h"
#include "harness/rng.h"
#include "reference/testing/gradcheck.h"

namespace sextant::ref {
namespace {

TEST(RefSoftmax, ForwardMatchesAHandComputedRow) {
  // [0, ln 2, ln 3] -> [1, 2, 3] / 6; a shift of the row changes nothing.
  Tensor x = Tensor::from_values(
      {2, 3}, {0, std::log(2.0), std::log(3.0), 1000, 1000 + std::log(2.0), 1000 + std::log(3.0)}, DType::f64);
  Tensor y = softmax_forward(x);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(y.at(r * 3 + j), (j + 1) / 6.0, 1e-12);
}

TEST(RefSoftmax, BackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({3, 7}, DType::f64, {5, tensor_id("x"), 2.0});
  Tensor dy = random_tensor({3, 7}, DType::f64, {5, tensor_id("dy")});
  auto loss = [&](const Tensor& v) { return dot(dy, softmax_forward(v)); };
  EXPECT_LT(compare(softmax_backward(dy, softmax_forward(x)), numeric_gradient(loss, x)).rel_l2, kGradcheckTolerance);
}

}  // namespace
}  // namespace sextant::ref
