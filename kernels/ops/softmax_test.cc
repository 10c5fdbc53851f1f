#include "kernels/ops/softmax.h"

#include <gtest/gtest.h>

#include "kernels/ops/op_testing.h"
#include "reference/softmax.h"

namespace sextant::ops {
namespace {

using testing::kTestDtypes;
using testing::matches_reference;
using testing::random_input;

TEST(Softmax, ForwardAndBackwardMatchTheReference) {
  testing::for_each_lane_width([&](int lanes) {
    SCOPED_TRACE(::testing::Message() << "lanes " << lanes);
    for (DType d : kTestDtypes)
      for (int64_t n : {5, 37, 300}) {
        Tensor x = random_input({2, 3, n}, d, "softmax.x", 4.0), dy = random_input({2, 3, n}, d, "softmax.dy");
        Tensor y = Tensor::empty(x.shape(), d), dx = Tensor::empty(x.shape(), d);
        softmax_forward(x, y);
        softmax_backward(dy, y, dx);
        EXPECT_TRUE(matches_reference(y, ref::softmax_forward(x), d, OpClass::softmax)) << "n " << n;
        // The reference backward from its own y: the op's y error enters dx too.
        EXPECT_TRUE(matches_reference(dx, ref::softmax_backward(dy, ref::softmax_forward(x)), d, OpClass::softmax))
            << "n " << n;
      }
  });
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  // exp(1000) overflows f32 without the max shift.
  Tensor x = random_input({4, 33}, DType::f32, "softmax.x");
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, x.at(i) + 1000.0);
  Tensor y = Tensor::empty(x.shape(), DType::f32);
  softmax_forward(x, y);
  EXPECT_TRUE(matches_reference(y, ref::softmax_forward(x), DType::f32, OpClass::softmax));
}

TEST(Softmax, ABackwardWithoutTheRowDotFails) {
  // dx = y * dy alone (forgetting - sum(dy * y)) must not pass the check.
  Tensor x = random_input({3, 20}, DType::f32, "softmax.x"), dy = random_input({3, 20}, DType::f32, "softmax.dy");
  Tensor y = Tensor::empty(x.shape(), DType::f32);
  softmax_forward(x, y);
  Tensor wrong = Tensor::empty(x.shape(), DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) wrong.set(i, y.at(i) * dy.at(i));
  EXPECT_TRUE(testing::differs_from_reference(wrong, ref::softmax_backward(dy, ref::softmax_forward(x)), DType::f32,
                                              OpClass::softmax));
}

TEST(Softmax, ShapeErrorsNameTheShapes) {
  Tensor x = Tensor::zeros({2, 6}, DType::f32), y = Tensor::zeros({2, 5}, DType::f32);
  EXPECT_TRUE(testing::throws_naming([&] { softmax_forward(x, y); }, "softmax_forward: y [2, 5] must be [2, 6]"));
}

}  // namespace
}  // namespace sextant::ops
