#include "reference/linear.h"

#include <gtest/gtest.h>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "reference/testing/gradcheck.h"

namespace sextant::ref {
namespace {

Tensor rnd(const Shape& s, const char* name) { return random_tensor(s, DType::f64, {7, tensor_id(name)}); }

TEST(RefLinear, ForwardMatchesAHandComputedProduct) {
  // x [1, 2] = [1, 2]; W [2, 3] = [[1, 0, 2], [0, 1, 3]]; b = [1, 1, 1] -> [2, 3, 9]
  Tensor x = Tensor::from_values({1, 2}, {1, 2}, DType::f64);
  Tensor w = Tensor::from_values({2, 3}, {1, 0, 2, 0, 1, 3}, DType::f64);
  Tensor b = Tensor::from_values({3}, {1, 1, 1}, DType::f64);
  EXPECT_EQ(linear_forward(x, w, b).to_vector(), (std::vector<double>{2, 3, 9}));
  EXPECT_EQ(linear_forward(x, w).to_vector(), (std::vector<double>{1, 2, 8}));
}

TEST(RefLinear, BackwardMatchesFiniteDifferences) {
  // Leading dims [2, 3] flatten to 6 rows.
  Tensor x = rnd({2, 3, 4}, "x"), w = rnd({4, 5}, "w"), b = rnd({5}, "b"), dy = rnd({2, 3, 5}, "dy");
  LinearGrads g = linear_backward(dy, x, w);
  auto loss_x = [&](const Tensor& v) { return dot(dy, linear_forward(v, w, b)); };
  auto loss_w = [&](const Tensor& v) { return dot(dy, linear_forward(x, v, b)); };
  auto loss_b = [&](const Tensor& v) { return dot(dy, linear_forward(x, w, v)); };
  EXPECT_LT(compare(g.dx, numeric_gradient(loss_x, x)).rel_l2, kGradcheckTolerance);
  EXPECT_LT(compare(g.dw, numeric_gradient(loss_w, w)).rel_l2, kGradcheckTolerance);
  EXPECT_LT(compare(g.db, numeric_gradient(loss_b, b)).rel_l2, kGradcheckTolerance);
  EXPECT_FALSE(linear_backward(dy, x, w, false).db.defined());
}

TEST(RefLinear, RejectsAWeightThatDoesNotFit) {
  EXPECT_THROW(linear_forward(rnd({2, 4}, "x"), rnd({3, 5}, "w")), RuntimeError);
}

}  // namespace
}  // namespace sextant::ref
