// General matrix multiply: C = alpha * op(A) @ op(B) + beta * C, row-major,
// op(X) = X or X^T. Host: OpenBLAS (cblas_sgemm / cblas_dgemm); CUDA: cuBLAS.
// Tensors of rank > 2 are viewed as matrices [product of leading dims, last dim].
// bf16 / f16 storage: inputs widened to f32, f32 accumulation, result rounded
// to nearest even on store. Mixed: bf16 or f16 A and B with an f32 C (no
// rounding of the result: what f32 weight-gradient accumulators want).
#pragma once

#include "harness/tensor.h"

namespace sextant::ops {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};

// Shapes: A [m, k] ([k, m] if trans_a), B [k, n] ([n, k] if trans_b), C [m, n].
// Throws RuntimeError when they do not fit.
GemmShape gemm_shape(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c);

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha = 1.0f,
          float beta = 0.0f);

// Raw f32 host form with leading dimensions (for blocked kernels that walk
// sub-matrices without copies).
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// FLOPs of one gemm (2 m n k).
inline double gemm_flops(const GemmShape& s) { return 2.0 * s.m * s.n * s.k; }

}  // namespace sextant::ops
