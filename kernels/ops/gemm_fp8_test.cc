#include "kernels/ops/gemm_fp8.h"

#include <gtest/gtest.h>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/op_testing.h"

namespace sextant::ops {
namespace {

using testing::f32_matrix;

// Values that block scaling's power-of-two scales carry into E4M3 exactly
// (at most 4 significant bits), so the FP8 gemm equals the f32 one.
TEST(GemmFp8, ExactOperandsGiveTheF32ProductInEveryTransposition) {
  const Fp8Recipe r = default_fp8_recipe(Fp8Scaling::block);
  const Tensor a = f32_matrix(2, 3, {1, -2, 0.5, 3, 4, -6}), b = f32_matrix(3, 2, {2, 1, -1, 0.25, 1.5, 7});
  const Fp8Tensor qa = quantize_fp8(a, Fp8Role::activation, true, r), qb = quantize_fp8(b, Fp8Role::weight, false, r);
  Tensor c = Tensor::empty({2, 2}, DType::f32), want = Tensor::empty({2, 2}, DType::f32);
  const float amax = gemm_fp8(qa, false, qb, false, c);
  gemm(a, false, b, false, want);
  EXPECT_EQ(c.to_vector(), want.to_vector());
  EXPECT_EQ(c.to_vector(), (std::vector<double>{4.75, 4, -7, -38}));
  EXPECT_EQ(amax, 38);

  // C^T = B^T A^T from the transposed storage.
  const Tensor at = f32_matrix(3, 2, {1, 3, -2, 4, 0.5, -6}), bt = f32_matrix(2, 3, {2, -1, 1.5, 1, 0.25, 7});
  Tensor ct = Tensor::empty({2, 2}, DType::f32);
  gemm_fp8(quantize_fp8(at, Fp8Role::activation, false, r), true, quantize_fp8(bt, Fp8Role::weight, true, r), true, ct);
  EXPECT_EQ(ct.to_vector(), want.to_vector());
}

TEST(GemmFp8, StoresBf16AndRefusesOtherOutputs) {
  const Fp8Recipe r = default_fp8_recipe(Fp8Scaling::block);
  const Fp8Tensor q = quantize_fp8(f32_matrix(1, 1, {3}), Fp8Role::activation, true, r);
  Tensor c = Tensor::empty({1, 1}, DType::bf16);
  gemm_fp8(q, false, q, false, c);
  EXPECT_EQ(c.dtype(), DType::bf16);
  EXPECT_EQ(c.to_vector()[0], 9);
  Tensor f16 = Tensor::empty({1, 1}, DType::f16);
  EXPECT_THROW(gemm_fp8(q, false, q, false, f16), RuntimeError);
}

TEST(GemmFp8, ThePlantedFaultScalesATwice) {
  const Fp8Recipe r = default_fp8_recipe(Fp8Scaling::block);
  const Fp8Tensor q = quantize_fp8(f32_matrix(1, 1, {3}), Fp8Role::activation, true, r);
  Tensor c = Tensor::empty({1, 1}, DType::f32);
  {
    const PlantedKernelFault fault(KernelFault::fp8_scale_inverse_twice);
    gemm_fp8(q, false, q, false, c);
  }
  EXPECT_NE(c.to_vector()[0], 9);
}

}  // namespace
}  // namespace sextant::ops
