// gemm on CUDA through cuBLASLt. Row-major C = op(A) op(B) is computed as the
// column-major product C^T = op(B)^T op(A)^T, so no data is transposed.
// bf16/f16 use tensor cores with f32 accumulation (CUBLAS_COMPUTE_32F), also
// with an f32 C; f32 stays true f32 (no TF32) so conformance tolerances keep
// their meaning; f64 goes through cublasGemmEx.
//
// cuBLASLt with a 32 MiB workspace and its heuristic's first algorithm, as
// PyTorch's matmul calls it on Hopper (cublasGemmEx picks without a
// workspace and gives up split-K and stream-K kernels). The descriptors and
// the chosen algorithm are kept per shape: the heuristic query costs
// microseconds, a training step repeats a few shapes many times.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdint>
#include <memory>

#include "harness/error.h"
#include "harness/memo.h"
#include "harness/strings.h"
#include "kernels/ops/cuda/cublaslt.h"
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

void gemm_ex(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha, float beta,
             int64_t m, int64_t n, int64_t k) {
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  const bool f64 = c.dtype() == DType::f64;
  double alpha64 = alpha, beta64 = beta;
  const void* pa = f64 ? static_cast<const void*>(&alpha64) : static_cast<const void*>(&alpha);
  const void* pb = f64 ? static_cast<const void*>(&beta64) : static_cast<const void*>(&beta);
  check_cublas(cublasGemmEx(cublas_handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                            static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), pa, b.raw(),
                            cublas_type(b.dtype()), static_cast<int>(ldb), a.raw(), cublas_type(a.dtype()),
                            static_cast<int>(lda), pb, c.raw(), cublas_type(c.dtype()), static_cast<int>(n),
                            f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

// Largest power of two up to 256 dividing a pointer: the alignment the
// chosen algorithm may assume.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

struct LtKey {
  DType a, b, c;
  bool trans_a, trans_b;
  int64_t m, n, k;
  uint32_t align_a, align_b, align_c;
  int device;
  bool operator==(const LtKey&) const = default;
};

// Column-major view of the product: lt_a is row-major b, lt_b row-major a.
struct LtPlan {
  MatmulDesc desc;
  Layout lt_a, lt_b, lt_c;
  cublasLtMatmulHeuristicResult_t choice{};
  bool found = false;  // false: no algorithm for this shape, cublasGemmEx runs it
};

Layout layout(DType dtype, int64_t rows, int64_t cols, int64_t ld) {
  return lt_layout(cublas_type(dtype), rows, cols, ld);
}

LtPlan plan_for(const LtKey& key) {
  LtPlan plan;
  cublasLtMatmulDesc_t desc = nullptr;
  check_cublas(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  plan.desc.reset(desc);
  const cublasOperation_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "TRANSA");
  check_cublas(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "TRANSB");
  // b: row-major [k, n] (or [n, k] transposed) is column-major [n, k] (or [k, n]).
  plan.lt_a = key.trans_b ? layout(key.b, key.k, key.n, key.k) : layout(key.b, key.n, key.k, key.n);
  plan.lt_b = key.trans_a ? layout(key.a, key.m, key.k, key.m) : layout(key.a, key.k, key.m, key.k);
  plan.lt_c = layout(key.c, key.n, key.m, key.n);
  Preference preference = lt_preference();
  cublasLtMatmulPreference_t pref = preference.get();
  for (auto [attribute, align] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b},
                                  {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a},
                                  {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
                                  {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c}})
    check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &align, sizeof(align)), "MIN_ALIGNMENT");
  int count = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt_handle(), desc, plan.lt_a.get(), plan.lt_b.get(), plan.lt_c.get(),
                                     plan.lt_c.get(), pref, 1, &plan.choice, &count);
  plan.found = status == CUBLAS_STATUS_SUCCESS && count > 0 && plan.choice.state == CUBLAS_STATUS_SUCCESS;
  return plan;
}

}  // namespace

cublasLtHandle_t lt_handle() {
  thread_local cublasLtHandle_t handle = [] {
    cublasLtHandle_t h = nullptr;
    check_cublas(cublasLtCreate(&h), "cublasLtCreate");
    return h;
  }();
  return handle;
}

void* lt_workspace() {
  thread_local void* buffer = [] {
    void* p = nullptr;
    SEXTANT_CHECK_CUDA(cudaMalloc(&p, kLtWorkspaceBytes));
    return p;
  }();
  return buffer;
}

Layout lt_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  check_cublas(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
               "cublasLtMatrixLayoutCreate");
  return Layout(l);
}

Preference lt_preference() {
  cublasLtMatmulPreference_t pref = nullptr;
  check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  Preference preference(pref);
  const uint64_t bytes = kLtWorkspaceBytes;
  check_cublas(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes)),
      "MAX_WORKSPACE_BYTES");
  return preference;
}

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha, float beta, int64_t m,
          int64_t n, int64_t k) {
  if (m == 0 || n == 0) return;
  if (c.dtype() == DType::f64) return gemm_ex(a, trans_a, b, trans_b, c, alpha, beta, m, n, k);
  int device = 0;
  SEXTANT_CHECK_CUDA(cudaGetDevice(&device));
  const LtKey key{a.dtype(),
                  b.dtype(),
                  c.dtype(),
                  trans_a,
                  trans_b,
                  m,
                  n,
                  k,
                  alignment_of(a.raw()),
                  alignment_of(b.raw()),
                  alignment_of(c.raw()),
                  device};
  thread_local Memo<LtKey, LtPlan> plans(256);
  const LtPlan& plan = plans.get(key, [&] { return plan_for(key); });
  if (!plan.found) return gemm_ex(a, trans_a, b, trans_b, c, alpha, beta, m, n, k);
  check_cublas(cublasLtMatmul(lt_handle(), plan.desc.get(), &alpha, b.raw(), plan.lt_a.get(), a.raw(), plan.lt_b.get(),
                              &beta, c.raw(), plan.lt_c.get(), c.raw(), plan.lt_c.get(), &plan.choice.algo,
                              lt_workspace(), kLtWorkspaceBytes, compute_stream()),
               "cublasLtMatmul");
}

}  // namespace sextant::ops::cuda
