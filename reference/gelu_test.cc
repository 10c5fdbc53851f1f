#include "reference/gelu.h"

#include <gtest/gtest.h>

#include "harness/compare.h"
#include "harness/rng.h"
#include "reference/testing/gradcheck.h"

namespace sextant::ref {
namespace {

TEST(RefGelu, ForwardMatchesKnownValues) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated independently.
  EXPECT_EQ(gelu(0.0), 0.0);
  EXPECT_NEAR(gelu(1.0), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(gelu(-1.0), -0.15880800939172324, 1e-15);
  EXPECT_NEAR(gelu(3.0), 2.996362607918227, 1e-14);
  EXPECT_NEAR(gelu_derivative(0.0), 0.5, 1e-15);
}

TEST(RefGelu, BackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({4, 5}, DType::f64, {3, tensor_id("x"), 3.0});
  Tensor dy = random_tensor({4, 5}, DType::f64, {3, tensor_id("dy")});
  auto loss = [&](const Tensor& v) { return dot(dy, gelu_forward(v)); };
  EXPECT_LT(compare(gelu_backward(dy, x), numeric_gradient(loss, x)).rel_l2, kGradcheckTolerance);
}

}  // namespace
}  // namespace sextant::ref
