// gemm on the GPU (cuBLAS) against the host op (OpenBLAS) and the float64
// reference: the CUDA result may be no worse than max(2 x the host error,
// the dtype's floor) (harness/compare.cc), every transpose and dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness/compare.h"
#include "harness/testing/gpu.h"
#include "harness/tolerance.h"
#include "kernels/ops/fp8_recipe.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/gemm_fp8.h"
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
          EXPECT_LE(e_gpu.rel_l2, fp8_tensor_core_bound(d).gate)
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

// x scaled by 2^((r / 128 + 2 c / 128) % 7 - 3) per 128 x 128 tile: every
// block, run and tile of the block recipes gets a scale of its own, so a
// scale read from the wrong place of cuBLASLt's layouts is off by a power
// of two, not by rounding.
Tensor tiled_magnitudes(Tensor x) {
  float* p = x.data<float>();
  for (int64_t r = 0; r < x.shape()[0]; ++r)
    for (int64_t c = 0; c < x.shape()[1]; ++c)
      p[r * x.shape()[1] + c] *= std::ldexp(1.0f, static_cast<int>((r / 128 + 2 * (c / 128)) % 7) - 3);
  return x;
}

// cuBLASLt's FP8 product (per-tensor and block scale modes) against float64
// of the dequantized operands, within the FP8 tensor cores' gate
// (fp8_tensor_core_bound), the host's f32 product of the same operands
// printed beside it, for the three gemms of an FP8 linear under each recipe
// that runs on CUDA.
TEST(CudaGemmFp8, EveryScaleModeMatchesTheHostProduct) {
  SEXTANT_REQUIRE_GPU();
  const int64_t tokens = 200, in = 300, out = 260;  // several blocks along every axis, none whole
  const Tensor x = tiled_magnitudes(sextant::random_tensor({tokens, in}, DType::f32, {11, tensor_id("fp8.x")}));
  const Tensor w = tiled_magnitudes(sextant::random_tensor({in, out}, DType::f32, {11, tensor_id("fp8.w")}));
  const Tensor dy = tiled_magnitudes(sextant::random_tensor({tokens, out}, DType::f32, {11, tensor_id("fp8.dy")}));
  Fp8Recipe block_f32_scales = default_fp8_recipe(Fp8Scaling::block);
  block_f32_scales.pow2_scales = false;
  for (const Fp8Recipe& recipe :
       {default_fp8_recipe(Fp8Scaling::current), default_fp8_recipe(Fp8Scaling::block), block_f32_scales}) {
    using R = Fp8Role;
    struct Gemm {
      const char* name;
      Fp8Tensor a, b;
      bool ta, tb;
      int64_t m, n;
    };
    const Gemm gemms[] = {{"fwd", quantize_fp8(x, R::activation, true, recipe),
                           quantize_fp8(w, R::weight, false, recipe), false, false, tokens, out},
                          {"dgrad", quantize_fp8(dy, R::gradient, true, recipe),
                           quantize_fp8(w, R::weight, true, recipe), false, true, tokens, in},
                          {"wgrad", quantize_fp8(x, R::activation, false, recipe),
                           quantize_fp8(dy, R::gradient, false, recipe), true, false, in, out}};
    for (const Gemm& g : gemms)
      for (DType d : {DType::f32, DType::bf16}) {
        Tensor host = Tensor::empty({g.m, g.n}, d), gpu = Tensor::empty({g.m, g.n}, d, Device::cuda);
        gemm_fp8(g.a, g.ta, g.b, g.tb, host);
        gemm_fp8(g.a, g.ta, g.b, g.tb, gpu);
        Tensor ref = Tensor::zeros({g.m, g.n}, DType::f64);
        gemm(g.a.dequantize().to(DType::f64), g.ta, g.b.dequantize().to(DType::f64), g.tb, ref);
        ErrorStats e_host = compare(host, ref), e_gpu = compare(gpu.to(Device::host), ref);
        EXPECT_EQ(e_gpu.nonfinite, 0);
        EXPECT_LE(e_gpu.rel_l2, fp8_tensor_core_bound(d).gate)
            << recipe.name() << (recipe.pow2_scales ? "" : " (f32 scales)") << " " << g.name << " " << dtype_name(d)
            << " host error " << e_host.rel_l2;
      }
  }
}

// MXFP8's 1x32 blocks are refused on CUDA with a line that says why.
TEST(CudaGemmFp8, MxBlocksAreRefused) {
  SEXTANT_REQUIRE_GPU();
  const Fp8Recipe mx = default_fp8_recipe(Fp8Scaling::mxfp8);
  const Tensor x = sextant::random_tensor({64, 96}, DType::f32, {12, tensor_id("fp8.x")});
  const Fp8Tensor a = quantize_fp8(x, Fp8Role::activation, true, mx), b = quantize_fp8(x, Fp8Role::weight, true, mx);
  Tensor c = Tensor::empty({64, 64}, DType::f32, Device::cuda);
  try {
    gemm_fp8(a, false, b, true, c);
    ADD_FAILURE() << "MXFP8 blocks ran on CUDA";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("VEC32_UE8M0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sextant::ops
