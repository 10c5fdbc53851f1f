#include "kernels/ops/layernorm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/ops/host_common.h"
#include "kernels/ops/op_testing.h"
#include "reference/layernorm.h"

namespace sextant::ops {
namespace {

using testing::kTestDtypes;
using testing::matches_reference;
using testing::random_input;

// Row lengths with and without a 16-lane tail.
constexpr int64_t kHidden[] = {37, 256};

TEST(LayerNorm, ForwardMatchesTheReference) {
  testing::for_each_lane_width([&](int lanes) {
    SCOPED_TRACE(::testing::Message() << "lanes " << lanes);
    for (DType d : kTestDtypes)
      for (int64_t h : kHidden) {
        Tensor x = random_input({2, 3, h}, d, "ln.x", 2.0), gamma = random_input({h}, d, "ln.gamma"),
               beta = random_input({h}, d, "ln.beta");
        Tensor y = Tensor::empty(x.shape(), d);
        LayerNormStats stats = layernorm_forward(x, gamma, beta, y, 1e-5f);
        ref::LayerNormOut ref = ref::layernorm_forward(x, gamma, beta, 1e-5);
        EXPECT_TRUE(matches_reference(y, ref.y, d, OpClass::norm)) << "h " << h;
        EXPECT_TRUE(matches_reference(stats.mean, ref.mean, DType::f32, OpClass::row_stat)) << "h " << h;
        EXPECT_TRUE(matches_reference(stats.rstd, ref.rstd, DType::f32, OpClass::row_stat)) << "h " << h;
      }
  });
}

TEST(LayerNorm, BackwardMatchesTheReference) {
  testing::for_each_lane_width([&](int lanes) {
    SCOPED_TRACE(::testing::Message() << "lanes " << lanes);
    for (DType d : kTestDtypes)
      for (int64_t h : kHidden) {
        Tensor x = random_input({2, 3, h}, d, "ln.x", 2.0), gamma = random_input({h}, d, "ln.gamma"),
               beta = random_input({h}, d, "ln.beta"), dy = random_input({2, 3, h}, d, "ln.dy");
        Tensor y = Tensor::empty(x.shape(), d), dx = Tensor::empty(x.shape(), d);
        Tensor dgamma = Tensor::empty({h}, d), dbeta = Tensor::empty({h}, d);
        LayerNormStats stats = layernorm_forward(x, gamma, beta, y);
        layernorm_backward(dy, x, gamma, stats, dx, dgamma, dbeta);
        ref::LayerNormGrads ref = ref::layernorm_backward(dy, x, gamma);
        EXPECT_TRUE(matches_reference(dx, ref.dx, d, OpClass::norm)) << "h " << h;
        EXPECT_TRUE(matches_reference(dgamma, ref.dgamma, d, OpClass::norm)) << "h " << h;
        EXPECT_TRUE(matches_reference(dbeta, ref.dbeta, d, OpClass::norm)) << "h " << h;
      }
  });
}

TEST(LayerNorm, ParametersMayHaveTheirOwnDtype) {
  // bf16 activations with f32 parameters and f32 parameter gradients.
  const int64_t h = 64;
  Tensor x = random_input({4, h}, DType::bf16, "ln.x"), dy = random_input({4, h}, DType::bf16, "ln.dy");
  Tensor gamma = random_input({h}, DType::f32, "ln.gamma"), beta = random_input({h}, DType::f32, "ln.beta");
  Tensor y = Tensor::empty(x.shape(), DType::bf16), dx = Tensor::empty(x.shape(), DType::bf16);
  Tensor dgamma = Tensor::empty({h}, DType::f32), dbeta = Tensor::empty({h}, DType::f32);
  layernorm_backward(dy, x, gamma, layernorm_forward(x, gamma, beta, y), dx, dgamma, dbeta);
  ref::LayerNormGrads ref = ref::layernorm_backward(dy, x, gamma);
  EXPECT_TRUE(matches_reference(y, ref::layernorm_forward(x, gamma, beta).y, DType::bf16, OpClass::norm));
  EXPECT_TRUE(matches_reference(dgamma, ref.dgamma, DType::f32, OpClass::norm));  // f32 stored: the f32 floor
  EXPECT_TRUE(matches_reference(dx, ref.dx, DType::bf16, OpClass::norm));
}

// A one-pass variance E[x^2] - E[x]^2 in f32, for the test below.
Tensor one_pass_layernorm(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  const int64_t h = x.dim(-1);
  Tensor y = Tensor::empty(x.shape(), DType::f32);
  for (int64_t r = 0; r < rows_of(x); ++r) {
    float sum = 0, sum_sq = 0;
    for (int64_t j = 0; j < h; ++j) {
      const float v = static_cast<float>(x.at(r * h + j));
      sum += v;
      sum_sq += v * v;
    }
    const float mean = sum / h, rstd = 1.0f / std::sqrt(sum_sq / h - mean * mean + 1e-5f);
    for (int64_t j = 0; j < h; ++j)
      y.set(r * h + j, (static_cast<float>(x.at(r * h + j)) - mean) * rstd * gamma.at(j) + beta.at(j));
  }
  return y;
}

TEST(LayerNorm, StaysAccurateWhenTheMeanDwarfsTheSpread) {
  // x = 30 + u, u uniform in [-1, 1): mean / std ~ 50. Rounding the mean to
  // f32 costs any f32 kernel ~u * mean / std (1e-6 here; 2e-5 at mean 300,
  // beyond the floor, which is why the offset is 30); a one-pass variance
  // costs ~u * (mean / std)^2 and fails.
  const int64_t h = 128;
  Tensor x = random_input({8, h}, DType::f32, "ln.x");
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 30.0 + x.at(i));
  Tensor gamma = random_input({h}, DType::f32, "ln.gamma"), beta = random_input({h}, DType::f32, "ln.beta");
  Tensor y = Tensor::empty(x.shape(), DType::f32);
  layernorm_forward(x, gamma, beta, y);
  const Tensor ref = ref::layernorm_forward(x, gamma, beta).y;
  EXPECT_TRUE(matches_reference(y, ref, DType::f32, OpClass::norm));
  EXPECT_TRUE(testing::differs_from_reference(one_pass_layernorm(x, gamma, beta), ref, DType::f32, OpClass::norm));
}

TEST(LayerNorm, RunsInPlace) {
  Tensor x = random_input({3, 40}, DType::f32, "ln.x"), gamma = random_input({40}, DType::f32, "ln.gamma"),
         beta = random_input({40}, DType::f32, "ln.beta");
  Tensor expected = ref::layernorm_forward(x, gamma, beta).y;
  layernorm_forward(x, gamma, beta, x);
  EXPECT_TRUE(matches_reference(x, expected, DType::f32, OpClass::norm));
}

TEST(LayerNorm, ShapeErrorsNameTheShapes) {
  Tensor x = Tensor::zeros({2, 8}, DType::f32), y = Tensor::zeros({2, 8}, DType::f32);
  Tensor gamma = Tensor::zeros({5}, DType::f32), beta = Tensor::zeros({8}, DType::f32);
  EXPECT_TRUE(testing::throws_naming([&] { layernorm_forward(x, gamma, beta, y); },
                                     "layernorm_forward: gamma [5] must be [8]"));
  Tensor bad_y = Tensor::zeros({2, 7}, DType::f32), good_gamma = Tensor::zeros({8}, DType::f32);
  EXPECT_TRUE(
      testing::throws_naming([&] { layernorm_forward(x, good_gamma, beta, bad_y); }, "y [2, 7] must be [2, 8]"));
  LayerNormStats stats{Tensor::zeros({3}, DType::f32), Tensor::zeros({2}, DType::f32)};
  Tensor dgamma = Tensor::zeros({8}, DType::f32), dbeta = Tensor::zeros({8}, DType::f32);
  EXPECT_TRUE(testing::throws_naming([&] { layernorm_backward(y, x, good_gamma, stats, y, dgamma, dbeta); },
                                     "mean [3] must be [2]"));
}

}  // namespace
}  // namespace sextant::ops
