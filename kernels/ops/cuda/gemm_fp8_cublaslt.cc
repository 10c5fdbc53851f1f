// FP8 gemm on CUDA through cuBLASLt, per-tensor scales (delayed and current
// scaling): FP8 tensor cores from compute capability 8.9 (Ada, Hopper).
//
// cuBLASLt takes FP8 operands in one layout only, "TN": in its column-major
// terms A transposed and B not, which for a row-major C = op(A) op(B) means
// both operands stored with the reduction contiguous (a as [m, k], b as
// [n, k]). The operands' codes (a byte each) are laid out so on the host,
// and every dimension is padded with zero codes (+0 in both formats, so the
// product is unchanged) to the 16 elements FP8 kernels need. The decode
// scales go in as the A and B scale pointers; C (f32 or bf16) is D, the
// padded product cut back to [m, n].
//
// Block scaling is not wired: cuBLAS 12.9 adds per-block scale modes
// (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, BLK128x128_32F on Hopper;
// VEC32_UE8M0 for MXFP8 on Blackwell), each with its own scale layout.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/memo.h"
#include "harness/strings.h"
#include "kernels/ops/cuda/cublaslt.h"
#include "kernels/ops/cuda/cuda_common.h"
#include "kernels/ops/cuda_ops.h"
#include "kernels/ops/fp8_recipe.h"

namespace sextant::ops::cuda {

namespace {

constexpr int64_t kFp8Align = 16;

int64_t padded(int64_t v) { return (v + kFp8Align - 1) / kFp8Align * kFp8Align; }

cudaDataType_t fp8_type(Fp8Format format) { return format == Fp8Format::e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

// t's codes as [outer_p, k_p] row-major, the reduction contiguous, padded with zeros.
std::vector<uint8_t> k_major(const Fp8Tensor& t, bool reduce_along_cols, int64_t outer_p, int64_t k_p) {
  std::vector<uint8_t> out(static_cast<size_t>(outer_p * k_p), 0);
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.cols; ++c)
      out[reduce_along_cols ? r * k_p + c : c * k_p + r] = t.codes[static_cast<size_t>(r * t.cols + c)];
  return out;
}

// A device allocation for the length of one call.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) { SEXTANT_CHECK_CUDA(cudaMalloc(&p_, std::max<size_t>(bytes, 1))); }
  ~DeviceBytes() { cudaFree(p_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* get() const { return p_; }
  void upload(const void* host, size_t bytes) {
    SEXTANT_CHECK_CUDA(cudaMemcpyAsync(p_, host, bytes, cudaMemcpyHostToDevice, compute_stream()));
  }

 private:
  void* p_ = nullptr;
};

void require_fp8_tensor_cores() {
  int device = 0, major = 0, minor = 0;
  SEXTANT_CHECK_CUDA(cudaGetDevice(&device));
  SEXTANT_CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SEXTANT_CHECK_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major * 10 + minor < 89)
    throw RuntimeError(cat("gemm_fp8 on CUDA needs FP8 tensor cores (compute capability 8.9+), device ", device, " is ",
                           major, ".", minor));
}

void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const void* value, size_t size,
         const char* what) {
  check_cublas(cublasLtMatmulDescSetAttribute(desc, attribute, value, size), what);
}

struct Fp8Key {
  Fp8Format a, b;
  DType d;
  int64_t m, n, k;
  int device;
  bool operator==(const Fp8Key&) const = default;
};

// The descriptors of one product and the heuristic's first algorithm; the
// scale pointers are set per call.
struct Fp8Plan {
  MatmulDesc desc;
  Layout lt_a, lt_b, lt_d;
  cublasLtMatmulHeuristicResult_t choice{};
};

Fp8Plan plan_for(const Fp8Key& key) {
  Fp8Plan plan;
  cublasLtMatmulDesc_t desc = nullptr;
  check_cublas(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  plan.desc.reset(desc);
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t), "TRANSA");
  set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n), "TRANSB");
  // D^T [n, m] = (b [n, k], k contiguous: column-major [k, n], read transposed) x (a: column-major [k, m]).
  plan.lt_a = lt_layout(fp8_type(key.b), key.k, key.n, key.k);
  plan.lt_b = lt_layout(fp8_type(key.a), key.k, key.m, key.k);
  plan.lt_d = lt_layout(key.d == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F, key.n, key.m, key.n);
  const Preference preference = lt_preference();
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt_handle(), desc, plan.lt_a.get(), plan.lt_b.get(), plan.lt_d.get(),
                                     plan.lt_d.get(), preference.get(), 1, &plan.choice, &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0)
    throw RuntimeError(cat("gemm_fp8: cuBLASLt has no FP8 algorithm for ", key.m, " x ", key.n, " x ", key.k, " (",
                           fp8_info(key.a).name, " x ", fp8_info(key.b).name, " -> ", dtype_name(key.d), ")"));
  return plan;
}

}  // namespace

void fp8_matmul_tn(const void* a, Fp8Format a_format, const void* b, Fp8Format b_format, const float* scales, void* d,
                   DType d_dtype, int64_t m, int64_t n, int64_t k) {
  if (m % kFp8Align || n % kFp8Align || k % kFp8Align)
    throw RuntimeError(cat("fp8_matmul_tn: ", m, " x ", n, " x ", k, " must be multiples of ", kFp8Align));
  if (d_dtype != DType::f32 && d_dtype != DType::bf16)
    throw RuntimeError("fp8_matmul_tn: D must be f32 or bf16, got " + dtype_name(d_dtype));
  int device = 0;
  SEXTANT_CHECK_CUDA(cudaGetDevice(&device));
  const Fp8Key key{a_format, b_format, d_dtype, m, n, k, device};
  thread_local Memo<Fp8Key, Fp8Plan> plans(64);
  const Fp8Plan& plan = plans.get(key, [&] {
    require_fp8_tensor_cores();
    return plan_for(key);
  });
  // cuBLASLt's A is our b (the column-major view): its scale is scales[1].
  const float* scale_lt_a = scales + 1;
  const float* scale_lt_b = scales;
  set(plan.desc.get(), CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_lt_a, sizeof(scale_lt_a), "A_SCALE_POINTER");
  set(plan.desc.get(), CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_lt_b, sizeof(scale_lt_b), "B_SCALE_POINTER");
  const float alpha = 1, beta = 0;
  check_cublas(cublasLtMatmul(lt_handle(), plan.desc.get(), &alpha, b, plan.lt_a.get(), a, plan.lt_b.get(), &beta, d,
                              plan.lt_d.get(), d, plan.lt_d.get(), &plan.choice.algo, lt_workspace(), kLtWorkspaceBytes,
                              compute_stream()),
               "cublasLtMatmul (FP8)");
}

float gemm_fp8(const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b, Tensor& c) {
  if (a.scale_inv.size() != 1 || b.scale_inv.size() != 1)
    throw RuntimeError(
        "gemm_fp8 on CUDA takes per-tensor scales (fp8_recipe=delayed or current); cuBLASLt's block scale modes "
        "(cuBLAS 12.9+) are not wired");
  const int64_t m = trans_a ? a.cols : a.rows, k = trans_a ? a.rows : a.cols, n = trans_b ? b.rows : b.cols;
  const int64_t mp = padded(m), np = padded(n), kp = padded(k);
  // a [m, k] reduces along its columns unless transposed; b [k, n] along its rows unless transposed.
  const std::vector<uint8_t> a_codes = k_major(a, !trans_a, mp, kp), b_codes = k_major(b, trans_b, np, kp);
  // The planted fault: A's values multiplied by its decode scale twice.
  const bool twice = kernel_fault_planted(KernelFault::fp8_scale_inverse_twice);
  const float scales[2] = {twice ? a.scale_inv.front() * a.scale_inv.front() : a.scale_inv.front(),
                           b.scale_inv.front()};
  DeviceBytes da(a_codes.size()), db(b_codes.size()), dscales(sizeof(scales));
  da.upload(a_codes.data(), a_codes.size());
  db.upload(b_codes.data(), b_codes.size());
  dscales.upload(scales, sizeof(scales));
  const size_t elem = dtype_size(c.dtype());
  DeviceBytes dd(static_cast<size_t>(mp * np) * elem);
  fp8_matmul_tn(da.get(), a.format, db.get(), b.format, static_cast<const float*>(dscales.get()), dd.get(), c.dtype(),
                mp, np, kp);
  // The padded D [mp, np] row-major, cut to C [m, n].
  SEXTANT_CHECK_CUDA(cudaMemcpy2DAsync(c.raw(), static_cast<size_t>(n) * elem, dd.get(), static_cast<size_t>(np) * elem,
                                       static_cast<size_t>(n) * elem, static_cast<size_t>(m), cudaMemcpyDeviceToDevice,
                                       compute_stream()));
  SEXTANT_CHECK_CUDA(cudaStreamSynchronize(compute_stream()));  // the buffers above leave with this call
  // C's amax as stored: cuBLASLt's AMAX_D pointer serves FP8 outputs; C here is f32 or bf16.
  return fp8_amax(c.to(Device::host));
}

}  // namespace sextant::ops::cuda
