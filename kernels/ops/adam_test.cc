#include "kernels/ops/adam.h"

#include <gtest/gtest.h>

#include "kernels/ops/op_testing.h"
#include "reference/adam.h"

namespace sextant::ops {
namespace {

using testing::matches_reference;
using testing::random_input;

struct Run {
  Tensor param, m, v;
};

// Three steps of the op (f32 master state, grads in grad_dtype) and of the reference (f64).
std::pair<Run, Run> three_steps(DType grad_dtype, bool wrong_step_count = false) {
  AdamConfig c;
  c.lr = 0.05;
  c.weight_decay = 0.1;
  ref::AdamConfig rc;
  rc.lr = c.lr;
  rc.weight_decay = c.weight_decay;
  const Shape shape{7, 19};
  Run op{random_input(shape, DType::f32, "adam.p"), Tensor::zeros(shape, DType::f32), Tensor::zeros(shape, DType::f32)};
  Run ref{op.param.to(DType::f64), Tensor::zeros(shape, DType::f64), Tensor::zeros(shape, DType::f64)};
  for (int64_t t = 1; t <= 3; ++t) {
    Tensor g = random_tensor(shape, grad_dtype, {42, tensor_id("adam.g"), 1.0 / t});
    g.set(t, 0.0);  // a zero gradient: the eps path
    adam_step(op.param, g, op.m, op.v, wrong_step_count ? 1 : t, c);
    ref::adam_step(ref.param, g, ref.m, ref.v, t, rc);
  }
  return {op, ref};
}

TEST(Adam, ThreeStepsMatchTheReference) {
  testing::for_each_lane_width([&](int lanes) {
    SCOPED_TRACE(::testing::Message() << "lanes " << lanes);
    for (DType grad_dtype : {DType::f32, DType::bf16}) {
      auto [op, ref] = three_steps(grad_dtype);
      // Master state is f32: the f32 floor, whatever the gradient dtype.
      EXPECT_TRUE(matches_reference(op.param, ref.param, DType::f32, OpClass::optimizer));
      EXPECT_TRUE(matches_reference(op.m, ref.m, DType::f32, OpClass::optimizer));
      EXPECT_TRUE(matches_reference(op.v, ref.v, DType::f32, OpClass::optimizer));
    }
  });
}

TEST(Adam, BiasCorrectionWithTheWrongStepFails) {
  auto [op, ref] = three_steps(DType::f32, true);
  EXPECT_TRUE(testing::differs_from_reference(op.param, ref.param, DType::f32, OpClass::optimizer));
}

TEST(Adam, MasterStateMustBeF32) {
  Tensor p = Tensor::zeros({4}, DType::bf16), g = Tensor::zeros({4}, DType::bf16);
  Tensor m = Tensor::zeros({4}, DType::f32), v = Tensor::zeros({4}, DType::f32);
  EXPECT_TRUE(testing::throws_naming([&] { adam_step(p, g, m, v, 1, {}); }, "param is bf16; master state must be f32"));
  Tensor p32 = Tensor::zeros({4}, DType::f32);
  EXPECT_TRUE(testing::throws_naming([&] { adam_step(p32, g, m, v, 0, {}); }, "step 0 must be >= 1"));
}

}  // namespace
}  // namespace sextant::ops
