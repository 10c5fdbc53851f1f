#include "kernels/ops/bias.h"

#include <gtest/gtest.h>

#include "kernels/ops/op_testing.h"
#include "reference/linear.h"

namespace sextant::ops {
namespace {

using testing::kTestDtypes;
using testing::matches_reference;
using testing::random_input;

TEST(Bias, AddMatchesTheReference) {
  testing::for_each_lane_width([&](int lanes) {
    SCOPED_TRACE(::testing::Message() << "lanes " << lanes);
    // The reference: a linear layer with an identity weight is x + b.
    for (DType d : kTestDtypes) {
      const int64_t n = 37;
      Tensor x = random_input({2, 5, n}, d, "bias.x"), b = random_input({n}, d, "bias.b");
      Tensor identity = Tensor::zeros({n, n}, DType::f64);
      for (int64_t j = 0; j < n; ++j) identity.set(j * n + j, 1.0);
      Tensor y = Tensor::empty(x.shape(), d);
      bias_add(x, b, y);
      EXPECT_TRUE(matches_reference(y, ref::linear_forward(x, identity, b), d, OpClass::elementwise));
      bias_add(x, b, x);  // in place
      EXPECT_TRUE(matches_reference(x, ref::linear_forward(y, identity), d, OpClass::elementwise));
    }
  });
}

TEST(Bias, BackwardIsTheColumnSumOfTheReference) {
  testing::for_each_lane_width([&](int lanes) {
    SCOPED_TRACE(::testing::Message() << "lanes " << lanes);
    for (DType d : kTestDtypes) {
      Tensor dy = random_input({4, 9, 70}, d, "bias.dy");
      Tensor dbias = Tensor::empty({70}, d);
      bias_backward(dy, dbias);
      Tensor x = Tensor::zeros({4, 9, 3}, DType::f64), w = Tensor::zeros({3, 70}, DType::f64);
      EXPECT_TRUE(matches_reference(dbias, ref::linear_backward(dy, x, w).db, d, OpClass::linear));
    }
  });
}

TEST(Bias, ShapeErrorsNameTheShapes) {
  Tensor x = Tensor::zeros({2, 6}, DType::f32), b = Tensor::zeros({5}, DType::f32);
  EXPECT_TRUE(testing::throws_naming([&] { bias_add(x, b, x); }, "bias_add: bias [5] must be [6]"));
  EXPECT_TRUE(testing::throws_naming([&] { bias_backward(x, b); }, "bias_backward: dbias [5] must be [6]"));
}

}  // namespace
}  // namespace sextant::ops
