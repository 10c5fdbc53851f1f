#include "kernels/ops/gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/ops/op_testing.h"
#include "reference/gelu.h"

namespace sextant::ops {
namespace {

using testing::kTestDtypes;
using testing::matches_reference;
using testing::random_input;

TEST(Gelu, ForwardAndBackwardMatchTheReference) {
  testing::for_each_lane_width([&](int lanes) {
    SCOPED_TRACE(::testing::Message() << "lanes " << lanes);
    for (DType d : kTestDtypes) {
      // 3 x 50 = 150 elements: vector body and scalar tail; values in [-5, 5).
      Tensor x = random_input({3, 50}, d, "gelu.x", 5.0), dy = random_input({3, 50}, d, "gelu.dy");
      Tensor y = Tensor::empty(x.shape(), d), dx = Tensor::empty(x.shape(), d);
      gelu_forward(x, y);
      gelu_backward(dy, x, dx);
      EXPECT_TRUE(matches_reference(y, ref::gelu_forward(x), d, OpClass::elementwise));
      EXPECT_TRUE(matches_reference(dx, ref::gelu_backward(dy, x), d, OpClass::elementwise));
    }
  });
}

TEST(Gelu, TellsTheTanhFormFromTheErfForm) {
  // The erf form differs from the tanh form by up to ~5e-4: an op computing
  // the wrong form must fail the f32 check.
  Tensor x = random_input({1000}, DType::f32, "gelu.x", 4.0), y = Tensor::empty({1000}, DType::f32);
  gelu_forward(x, y);
  Tensor erf_form = Tensor::empty({1000}, DType::f64);
  for (int64_t i = 0; i < x.numel(); ++i) erf_form.set(i, 0.5 * x.at(i) * (1 + std::erf(x.at(i) / std::sqrt(2.0))));
  EXPECT_TRUE(testing::differs_from_reference(y, erf_form, DType::f32, OpClass::elementwise));
}

TEST(Gelu, ExtremeInputsStayFiniteAndNanPropagates) {
  Tensor x = Tensor::from_values({6}, {-1e4, -100, -10, 10, 100, 1e4}, DType::f32);
  Tensor y = Tensor::empty({6}, DType::f32), dx = Tensor::empty({6}, DType::f32);
  Tensor ones = Tensor::from_values({6}, {1, 1, 1, 1, 1, 1}, DType::f32);
  gelu_forward(x, y);
  gelu_backward(ones, x, dx);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(y.at(i), x.at(i) > 0 ? x.at(i) : 0.0, 1e-6) << x.at(i);
    EXPECT_NEAR(dx.at(i), x.at(i) > 0 ? 1.0 : 0.0, 1e-6) << x.at(i);
  }
  Tensor nan = Tensor::from_values({1}, {std::numeric_limits<double>::quiet_NaN()}, DType::f32);
  Tensor out = Tensor::empty({1}, DType::f32);
  gelu_forward(nan, out);
  EXPECT_TRUE(std::isnan(out.at(0)));
}

TEST(Gelu, ShapeErrorsNameTheShapes) {
  Tensor x = Tensor::zeros({4, 3}, DType::f32), y = Tensor::zeros({3, 4}, DType::f32);
  EXPECT_TRUE(testing::throws_naming([&] { gelu_forward(x, y); }, "gelu_forward: y [3, 4] must be [4, 3]"));
  EXPECT_TRUE(testing::throws_naming([&] { gelu_backward(y, x, x); }, "gelu_backward: dy [3, 4] must be [4, 3]"));
}

}  // namespace
}  // namespace sextant::ops
