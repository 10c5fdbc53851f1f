#include "kernels/ops/gemm_fp8.h"

#include <algorithm>
#include <cmath>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/ops/gemm.h"

namespace sextant::ops {

float gemm_fp8(const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b, Tensor& c) {
  if (c.dtype() != DType::f32 && c.dtype() != DType::bf16)
    throw RuntimeError("gemm_fp8: C must be f32 or bf16, got " + dtype_name(c.dtype()));
  if (!c.is_host()) return SEXTANT_CUDA_CALL(cuda::gemm_fp8(a, trans_a, b, trans_b, c));
  Tensor ad = a.dequantize();
  if (kernel_fault_planted(KernelFault::fp8_scale_inverse_twice)) {
    float* p = ad.data<float>();
    for (int64_t r = 0; r < a.rows; ++r)
      for (int64_t col = 0; col < a.cols; ++col) p[r * a.cols + col] *= a.scale_inv_at(r, col);
  }
  const Tensor bd = b.dequantize();
  // An f32 C takes the product in place; a bf16 C its rounding, into C's own storage.
  const bool f32_out = c.dtype() == DType::f32;
  Tensor product = f32_out ? c : Tensor::empty(c.shape(), DType::f32);
  gemm(ad, trans_a, bd, trans_b, product);
  if (!f32_out) c.copy_from(product.to(c.dtype()));
  return fp8_amax(c);  // of C as stored
}

}  // namespace sextant::ops
