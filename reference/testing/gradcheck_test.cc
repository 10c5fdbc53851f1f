#include "reference/testing/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

#include "harness/compare.h"
#include "harness/rng.h"

namespace sextant::ref {
namespace {

double sum_of_sines(const Tensor& x) {
  double s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += std::sin(x.at(i));
  return s;
}

Tensor map(const Tensor& x, double (*f)(double)) {
  Tensor out = Tensor::empty(x.shape(), DType::f64);
  for (int64_t i = 0; i < x.numel(); ++i) out.set(i, f(x.at(i)));
  return out;
}

TEST(Gradcheck, AcceptsTheRightDerivative) {
  Tensor x = random_tensor({3, 4}, DType::f64, {1, tensor_id("gc.x"), 2.0});
  Tensor numeric = numeric_gradient(sum_of_sines, x);
  EXPECT_LT(compare(map(x, [](double v) { return std::cos(v); }), numeric).rel_l2, kGradcheckTolerance);
}

TEST(Gradcheck, RejectsAWrongDerivative) {
  // cos(x) + 1e-3: a small wrong term must fail the gradient check.
  Tensor x = random_tensor({3, 4}, DType::f64, {1, tensor_id("gc.x"), 2.0});
  Tensor numeric = numeric_gradient(sum_of_sines, x);
  EXPECT_GT(compare(map(x, [](double v) { return std::cos(v) + 1e-3; }), numeric).rel_l2, kGradcheckTolerance);
}

TEST(Gradcheck, LeavesTheInputUntouched) {
  Tensor x = random_tensor({5}, DType::f64, {2, tensor_id("gc.x")});
  Tensor before = x.clone();
  numeric_gradient(sum_of_sines, x);
  EXPECT_EQ(compare(x, before).max_abs, 0.0);
}

TEST(Gradcheck, DotIsTheSumOfProducts) {
  Tensor a = Tensor::from_values({3}, {1, 2, 3}, DType::f64), b = Tensor::from_values({3}, {4, -5, 6}, DType::f64);
  EXPECT_DOUBLE_EQ(dot(a, b), 12.0);
}

}  // namespace
}  // namespace sextant::ref
