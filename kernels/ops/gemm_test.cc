#include "kernels/ops/gemm.h"

#include <gtest/gtest.h>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"

namespace sextant::ops {
namespace {

// Plain triple loop in f64: the reference for the wrapper.
Tensor matmul_reference(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  Tensor a64 = a.to(DType::f64), b64 = b.to(DType::f64);
  int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1), n = tb ? b.dim(0) : b.dim(1);
  Tensor c = Tensor::zeros({m, n}, DType::f64);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a64.at(ta ? p * m + i : i * k + p) * b64.at(tb ? j * k + p : p * n + j);
      c.set(i * n + j, s);
    }
  return c;
}

TEST(Gemm, AllTransposesAndDtypesMatchTheReference) {
  const int64_t m = 7, n = 5, k = 9;
  for (DType d : {DType::f64, DType::f32, DType::bf16, DType::f16})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, d, {1, tensor_id("a")});
        Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, d, {1, tensor_id("b")});
        Tensor c = Tensor::zeros({m, n}, d);
        gemm(a, ta, b, tb, c);
        ErrorStats e = compare(c, matmul_reference(a, ta, b, tb));
        EXPECT_LT(e.rel_l2, 4 * unit_roundoff(d)) << dtype_name(d) << " ta=" << ta << " tb=" << tb;
      }
}

TEST(Gemm, AccumulatesWithBetaAndScalesWithAlpha) {
  Tensor a = random_tensor({4, 3}, DType::f32, {2, tensor_id("a")});
  Tensor b = random_tensor({3, 6}, DType::f32, {2, tensor_id("b")});
  Tensor c0 = random_tensor({4, 6}, DType::f32, {2, tensor_id("c")});
  Tensor c = c0.clone();
  gemm(a, false, b, false, c, 2.0f, 1.0f);
  Tensor ab = matmul_reference(a, false, b, false);
  for (int64_t i = 0; i < c.numel(); ++i) EXPECT_NEAR(c.at(i), c0.at(i) + 2 * ab.at(i), 1e-5);
}

// bf16 / f16 inputs into an f32 C (weight-gradient accumulation): the
// product of the rounded inputs, accumulated in f32 without a 16-bit rounding.
TEST(Gemm, SixteenBitInputsAccumulateIntoF32) {
  const int64_t m = 7, n = 5, k = 9;
  for (DType d : {DType::bf16, DType::f16})
    for (bool ta : {false, true}) {
      Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, d, {4, tensor_id("a")});
      Tensor b = random_tensor({k, n}, d, {4, tensor_id("b")});
      Tensor c0 = random_tensor({m, n}, DType::f32, {4, tensor_id("c")});
      Tensor c = c0.clone();
      gemm(a, ta, b, false, c, 1.0f, 1.0f);
      Tensor want = matmul_reference(a, ta, b, false);
      for (int64_t i = 0; i < want.numel(); ++i) want.set(i, want.at(i) + c0.at(i));
      EXPECT_LT(compare(c, want).rel_l2, 4 * unit_roundoff(DType::f32)) << dtype_name(d) << " ta=" << ta;
    }
  Tensor a = Tensor::zeros({2, 2}, DType::bf16), b = Tensor::zeros({2, 2}, DType::f16);
  Tensor c = Tensor::zeros({2, 2}, DType::f32), c16 = Tensor::zeros({2, 2}, DType::f16);
  EXPECT_THROW(gemm(a, false, b, false, c), RuntimeError);    // A and B differ
  EXPECT_THROW(gemm(a, false, a, false, c16), RuntimeError);  // a 16-bit C of another dtype
}

TEST(Gemm, RejectsMismatchedShapes) {
  Tensor a = Tensor::zeros({4, 3}, DType::f32), b = Tensor::zeros({4, 6}, DType::f32);
  Tensor c = Tensor::zeros({4, 6}, DType::f32);
  EXPECT_THROW(gemm(a, false, b, false, c), RuntimeError);
}

}  // namespace
}  // namespace sextant::ops
