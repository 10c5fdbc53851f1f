#include "reference/adam.h"

#include <gtest/gtest.h>

#include <cmath>

#include "harness/rng.h"

namespace sextant::ref {
namespace {

TEST(RefAdam, FirstStepMovesByLrTimesTheSignOfTheGradient) {
  // Step 1 with bias correction: mhat = g, vhat = g^2, so the update is
  // lr g / (|g| + eps); decoupled decay first scales p by (1 - lr wd).
  AdamConfig c;
  c.lr = 0.01;
  c.weight_decay = 0.1;
  Tensor p0 = random_tensor({6}, DType::f64, {1, tensor_id("p")});
  Tensor g = random_tensor({6}, DType::f64, {1, tensor_id("g")});
  Tensor p = p0.clone(), m = Tensor::zeros({6}, DType::f64), v = Tensor::zeros({6}, DType::f64);
  adam_step(p, g, m, v, 1, c);
  for (int64_t i = 0; i < 6; ++i) {
    const double gi = g.at(i);
    EXPECT_NEAR(p.at(i), p0.at(i) * (1 - c.lr * c.weight_decay) - c.lr * gi / (std::abs(gi) + c.eps), 1e-15);
    EXPECT_NEAR(m.at(i), (1 - c.beta1) * gi, 1e-16);
    EXPECT_NEAR(v.at(i), (1 - c.beta2) * gi * gi, 1e-16);
  }
}

TEST(RefAdam, SecondStepUsesBothMoments) {
  // Constant gradient g: after two steps mhat = g and vhat = g^2 again.
  AdamConfig c;
  Tensor p = Tensor::from_values({1}, {1.0}, DType::f64), g = Tensor::from_values({1}, {0.5}, DType::f64);
  Tensor m = Tensor::zeros({1}, DType::f64), v = Tensor::zeros({1}, DType::f64);
  adam_step(p, g, m, v, 1, c);
  adam_step(p, g, m, v, 2, c);
  EXPECT_NEAR(p.at(0), 1.0 - 2 * c.lr * 0.5 / (0.5 + c.eps), 1e-15);
}

}  // namespace
}  // namespace sextant::ref
