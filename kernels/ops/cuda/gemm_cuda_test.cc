// gemm on the GPU (cuBLAS) against the host op (OpenBLAS) and the float64
// reference: the CUDA result may be no worse than max(2 x the host error,
// the dtype's floor) (harness/compare.cc), every transpose and dtype.
#include <gtest/gtest.h>

#include "harness/compare.h"
#include "harness/testing/gpu.h"
#include "harness/tolerance.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/random.h"

namespace sextant::ops {
namespace {

// The reference, in f64 on the host (a plain product of the rounded inputs).
Tensor reference(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c0, float alpha, float beta) {
  Tensor a64 = a.to(DType::f64), b64 = b.to(DType::f64), c = c0.to(DType::f64);
  gemm(a64, ta, b64, tb, c, alpha, beta);  // cblas_dgemm: f64 throughout
  return c;
}

TEST(CudaGemm, MatchesTheHostOpAndTheReference) {
  SEXTANT_REQUIRE_GPU();
  const int64_t m = 67, n = 45, k = 129;  // odd sizes: no tile divides them
  for (DType d : {DType::f64, DType::f32, DType::bf16, DType::f16})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.0f, 0.5f}) {
          const float alpha = 1.25f;
          Tensor a = sextant::random_tensor(ta ? Shape{k, m} : Shape{m, k}, d, {3, tensor_id("gemm.a")});
          Tensor b = sextant::random_tensor(tb ? Shape{n, k} : Shape{k, n}, d, {3, tensor_id("gemm.b")});
          Tensor c0 = sextant::random_tensor({m, n}, d, {3, tensor_id("gemm.c")});
          Tensor host = c0.clone();
          gemm(a, ta, b, tb, host, alpha, beta);
          Tensor gpu = c0.to(Device::cuda);
          gemm(a.to(Device::cuda), ta, b.to(Device::cuda), tb, gpu, alpha, beta);
          Tensor ref = reference(a, ta, b, tb, c0, alpha, beta);
          ErrorStats e_host = compare(host, ref), e_gpu = compare(gpu.to(Device::host), ref);
          EXPECT_EQ(e_gpu.nonfinite, 0);
          EXPECT_LE(e_gpu.rel_l2, distributed_bound(d, OpClass::linear, e_host.rel_l2))
              << dtype_name(d) << " ta=" << ta << " tb=" << tb << " beta=" << beta << " host error " << e_host.rel_l2;
        }
}

// bf16 / f16 A and B accumulated into an f32 C (the step suite's weight
// gradients): cuBLAS's mixed combination against the host op, f32 bound.
TEST(CudaGemm, SixteenBitInputsAccumulateIntoF32) {
  SEXTANT_REQUIRE_GPU();
  const int64_t m = 67, n = 45, k = 129;
  for (DType d : {DType::bf16, DType::f16})
    for (bool ta : {false, true}) {
      Tensor a = sextant::random_tensor(ta ? Shape{k, m} : Shape{m, k}, d, {5, tensor_id("gemm.a")});
      Tensor b = sextant::random_tensor({k, n}, d, {5, tensor_id("gemm.b")});
      Tensor c0 = sextant::random_tensor({m, n}, DType::f32, {5, tensor_id("gemm.c")});
      Tensor host = c0.clone();
      gemm(a, ta, b, false, host, 1.0f, 1.0f);
      Tensor gpu = c0.to(Device::cuda);
      gemm(a.to(Device::cuda), ta, b.to(Device::cuda), false, gpu, 1.0f, 1.0f);
      Tensor ref = reference(a, ta, b, false, c0, 1.0f, 1.0f);
      ErrorStats e_host = compare(host, ref), e_gpu = compare(gpu.to(Device::host), ref);
      EXPECT_EQ(gpu.dtype(), DType::f32);
      EXPECT_LE(e_gpu.rel_l2, distributed_bound(DType::f32, OpClass::linear, e_host.rel_l2))
          << dtype_name(d) << " ta=" << ta << " host error " << e_host.rel_l2;
    }
}

TEST(CudaGemm, LargeBf16ProductOnDeviceInputs) {
  SEXTANT_REQUIRE_GPU();
  // Inputs generated on the GPU (the benchmark's path) and on the host agree,
  // so the host op checks the device product of the same values.
  const int64_t s = 512;
  RandomSpec sa{9, tensor_id("gemm.big.a")}, sb{9, tensor_id("gemm.big.b")};
  Tensor a = random_tensor({s, s}, DType::bf16, sa, Device::cuda);
  Tensor b = random_tensor({s, s}, DType::bf16, sb, Device::cuda);
  Tensor c = Tensor::empty({s, s}, DType::bf16, Device::cuda);
  gemm(a, false, b, true, c);
  Tensor host = Tensor::empty({s, s}, DType::bf16);
  gemm(sextant::random_tensor({s, s}, DType::bf16, sa), false, sextant::random_tensor({s, s}, DType::bf16, sb), true,
       host);
  Tensor ref =
      reference(a.to(Device::host), false, b.to(Device::host), true, Tensor::zeros({s, s}, DType::bf16), 1.0f, 0.0f);
  ErrorStats e_host = compare(host, ref), e_gpu = compare(c.to(Device::host), ref);
  EXPECT_LE(e_gpu.rel_l2, distributed_bound(DType::bf16, OpClass::linear, e_host.rel_l2))
      << "host error " << e_host.rel_l2;
}

}  // namespace
}  // namespace sextant::ops
