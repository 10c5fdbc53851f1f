// gemm on CUDA through cuBLAS. Row-major C = op(A) op(B) is computed as the
// column-major product C^T = op(B)^T op(A)^T, so no data is transposed.
// bf16/f16 use tensor cores with f32 accumulation (CUBLAS_COMPUTE_32F), also
// with an f32 C (a cublasGemmEx combination: A/B CUDA_R_16BF or 16F, C 32F);
// f32 stays true f32 (no TF32) so conformance tolerances keep their meaning.
#include <cublas_v2.h>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/cuda/cuda_common.h"
#include "kernels/ops/cuda_ops.h"

namespace sextant::ops::cuda {

namespace {
cudaDataType_t cublas_type(DType d) {
  switch (d) {
    case DType::f64: return CUDA_R_64F;
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}
}  // namespace

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha, float beta, int64_t m,
          int64_t n, int64_t k) {
  if (m == 0 || n == 0) return;
  cublasHandle_t handle = cublas_handle();
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  const bool f64 = c.dtype() == DType::f64;
  double alpha64 = alpha, beta64 = beta;
  const void* pa = f64 ? static_cast<const void*>(&alpha64) : static_cast<const void*>(&alpha);
  const void* pb = f64 ? static_cast<const void*>(&beta64) : static_cast<const void*>(&beta);
  check_cublas(cublasGemmEx(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                            static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), pa, b.raw(),
                            cublas_type(b.dtype()), static_cast<int>(ldb), a.raw(), cublas_type(a.dtype()),
                            static_cast<int>(lda), pb, c.raw(), cublas_type(c.dtype()), static_cast<int>(n),
                            f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

}  // namespace sextant::ops::cuda
