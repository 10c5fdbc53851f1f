#include "kernels/ops/gemm.h"

#include <cblas.h>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/op_times.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/ops/op_names.h"

namespace sextant::ops {

namespace {
// Rows and columns of a tensor viewed as a matrix.
std::pair<int64_t, int64_t> as_matrix(const Tensor& t) {
  if (t.ndim() == 0) return {1, 1};
  int64_t cols = t.dim(-1);
  return {cols ? t.numel() / cols : 0, cols};
}
}  // namespace

GemmShape gemm_shape(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c) {
  auto [ar, ac] = as_matrix(a);
  auto [br, bc] = as_matrix(b);
  auto [cr, cc] = as_matrix(c);
  GemmShape s{trans_a ? ac : ar, trans_b ? br : bc, trans_a ? ar : ac};
  int64_t kb = trans_b ? bc : br;
  if (kb != s.k || cr != s.m || cc != s.n)
    throw RuntimeError(cat("gemm: A ", shape_string(a.shape()), trans_a ? "^T" : "", " x B ", shape_string(b.shape()),
                           trans_b ? "^T" : "", " does not fit C ", shape_string(c.shape())));
  const bool mixed = c.dtype() == DType::f32 && (a.dtype() == DType::bf16 || a.dtype() == DType::f16);
  if (a.dtype() != b.dtype() || (a.dtype() != c.dtype() && !mixed))
    throw RuntimeError(cat("gemm: A ", dtype_name(a.dtype()), ", B ", dtype_name(b.dtype()), ", C ",
                           dtype_name(c.dtype()),
                           ": A and B share a dtype, and C has it too or is f32 under "
                           "16-bit A and B"));
  return s;
}

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

namespace {
void gemm_host(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha, float beta,
               const GemmShape& s) {
  const int64_t lda = trans_a ? s.m : s.k, ldb = trans_b ? s.k : s.n;
  switch (c.dtype()) {
    case DType::f32:
      if (a.dtype() != DType::f32) {  // mixed: widen the 16-bit inputs, accumulate into C itself
        const Tensor a32 = a.to(DType::f32), b32 = b.to(DType::f32);
        gemm_f32(trans_a, trans_b, s.m, s.n, s.k, alpha, a32.data<float>(), lda, b32.data<float>(), ldb, beta,
                 c.data<float>(), s.n);
        return;
      }
      gemm_f32(trans_a, trans_b, s.m, s.n, s.k, alpha, a.data<float>(), lda, b.data<float>(), ldb, beta,
               c.data<float>(), s.n);
      return;
    case DType::f64:
      if (s.m && s.n)
        cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                    static_cast<blasint>(s.m), static_cast<blasint>(s.n), static_cast<blasint>(s.k), alpha,
                    a.data<double>(), static_cast<blasint>(lda), b.data<double>(), static_cast<blasint>(ldb), beta,
                    c.data<double>(), static_cast<blasint>(s.n));
      return;
    case DType::bf16:
    case DType::f16: {
      // Widen, multiply in f32, round back once.
      Tensor a32 = a.to(DType::f32), b32 = b.to(DType::f32);
      Tensor c32 = beta != 0.0f ? c.to(DType::f32) : Tensor::empty(c.shape(), DType::f32);
      gemm_f32(trans_a, trans_b, s.m, s.n, s.k, alpha, a32.data<float>(), lda, b32.data<float>(), ldb, beta,
               c32.data<float>(), s.n);
      c.copy_from(c32.to(c.dtype()));
      return;
    }
  }
}
}  // namespace

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha, float beta) {
  OpTimer timer(timed::kGemm, c.device());
  GemmShape s = gemm_shape(a, trans_a, b, trans_b, c);
  if (kernel_fault_planted(KernelFault::gemm_ignores_beta)) beta = 0.0f;
  if (c.is_host()) return gemm_host(a, trans_a, b, trans_b, c, alpha, beta, s);
  SEXTANT_CUDA_CALL(cuda::gemm(a, trans_a, b, trans_b, c, alpha, beta, s.m, s.n, s.k));
}

}  // namespace sextant::ops
