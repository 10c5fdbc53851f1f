#include "reference/layernorm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "harness/compare.h"
#include "harness/rng.h"
#include "reference/testing/gradcheck.h"

namespace sextant::ref {
namespace {

Tensor rnd(const Shape& s, const char* name) { return random_tensor(s, DType::f64, {11, tensor_id(name)}); }

TEST(RefLayerNorm, ForwardMatchesAHandComputedRow) {
  // [1, 2, 3]: mean 2, var 2/3; with eps 0: y = (x - 2) / sqrt(2/3).
  Tensor x = Tensor::from_values({1, 3}, {1, 2, 3}, DType::f64);
  Tensor ones = Tensor::from_values({3}, {1, 1, 1}, DType::f64), zeros = Tensor::zeros({3}, DType::f64);
  LayerNormOut out = layernorm_forward(x, ones, zeros, 0.0);
  const double s = std::sqrt(2.0 / 3.0);
  EXPECT_NEAR(out.y.at(0), -1 / s, 1e-15);
  EXPECT_NEAR(out.y.at(1), 0, 1e-15);
  EXPECT_NEAR(out.y.at(2), 1 / s, 1e-15);
  EXPECT_DOUBLE_EQ(out.mean.at(0), 2.0);
  EXPECT_NEAR(out.rstd.at(0), 1 / s, 1e-15);
}

TEST(RefLayerNorm, BackwardMatchesFiniteDifferences) {
  Tensor x = rnd({2, 3, 6}, "x"), gamma = rnd({6}, "g"), beta = rnd({6}, "b"), dy = rnd({2, 3, 6}, "dy");
  const double eps = 1e-5;
  LayerNormGrads g = layernorm_backward(dy, x, gamma, eps);
  auto loss_x = [&](const Tensor& v) { return dot(dy, layernorm_forward(v, gamma, beta, eps).y); };
  auto loss_g = [&](const Tensor& v) { return dot(dy, layernorm_forward(x, v, beta, eps).y); };
  auto loss_b = [&](const Tensor& v) { return dot(dy, layernorm_forward(x, gamma, v, eps).y); };
  EXPECT_LT(compare(g.dx, numeric_gradient(loss_x, x)).rel_l2, kGradcheckTolerance);
  EXPECT_LT(compare(g.dgamma, numeric_gradient(loss_g, gamma)).rel_l2, kGradcheckTolerance);
  EXPECT_LT(compare(g.dbeta, numeric_gradient(loss_b, beta)).rel_l2, kGradcheckTolerance);
}

}  // namespace
}  // namespace sextant::ref
