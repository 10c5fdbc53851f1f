// FP8 gemm on CUDA through cuBLASLt: FP8 tensor cores from compute
// capability 8.9 (Ada, Hopper), per-tensor scales (delayed and current
// scaling) everywhere, and TransformerEngine's block scaling (1x128 runs of
// activations and gradients, 128x128 tiles of weights) through cuBLAS 12.9's
// block scale modes on Hopper.
//
// cuBLASLt takes FP8 operands in one layout only, "TN": in its column-major
// terms A transposed and B not, which for a row-major C = op(A) op(B) means
// both operands stored with the reduction contiguous (a as [m, k], b as
// [n, k]). The operands' codes (a byte each) are laid out so on the host,
// and every dimension is padded with zero codes (+0 in both formats, so the
// product is unchanged) to the 16 elements FP8 kernels need, or to 128 under
// block scales (whole blocks; a padded block's scale is 1). The decode
// scales go in as the A and B scale pointers, per tensor or per block in the
// layout gemm_fp8_cublaslt.h gives; C (f32 or bf16) is D, the padded
// product cut back to [m, n].
//
// MXFP8's 1x32 blocks with E8M0 scales (VEC32_UE8M0) are Blackwell's
// (compute capability 10.x) and are not wired.
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
#include "kernels/ops/cuda/gemm_fp8_cublaslt.h"
#include "kernels/ops/cuda_ops.h"
#include "kernels/ops/fp8_recipe.h"

namespace sextant::ops::cuda {

namespace {

constexpr int64_t kFp8Align = 16;
constexpr int64_t kScaleBlock = 128;  // the edge of cuBLASLt's block scale modes
// cuBLAS's version (major * 10000 + minor * 100 + patch) that added the block modes.
constexpr int kBlockScalesCublas = 120900;

int64_t round_up(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }

cudaDataType_t fp8_type(Fp8Format format) { return format == Fp8Format::e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

const char* mode_name(Fp8ScaleMode mode) {
  switch (mode) {
    case Fp8ScaleMode::tensor: return "per-tensor";
    case Fp8ScaleMode::vec128: return "1x128 blocks";
    case Fp8ScaleMode::blk128: return "128x128 blocks";
  }
  return "?";
}

cublasLtMatmulMatrixScale_t lt_mode(Fp8ScaleMode mode) {
  switch (mode) {
    case Fp8ScaleMode::tensor: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    case Fp8ScaleMode::vec128: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case Fp8ScaleMode::blk128: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  }
  throw RuntimeError("gemm_fp8: unknown scale mode");
}

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

int compute_capability(int device) {
  int major = 0, minor = 0;
  SEXTANT_CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SEXTANT_CHECK_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

// FP8 tensor cores, and for block scales Hopper with cuBLAS 12.9+ (built
// against and loaded): a one-line refusal otherwise.
void require_fp8_support(int device, Fp8ScaleMode a, Fp8ScaleMode b) {
  const int cc = compute_capability(device);
  if (cc < 89)
    throw RuntimeError(cat("gemm_fp8 on CUDA needs FP8 tensor cores (compute capability 8.9+), device ", device, " is ",
                           cc / 10, ".", cc % 10));
  if (a == Fp8ScaleMode::tensor && b == Fp8ScaleMode::tensor) return;
  const int loaded = static_cast<int>(cublasLtGetVersion());
  if (CUBLAS_VERSION < kBlockScalesCublas || loaded < kBlockScalesCublas)
    throw RuntimeError(cat("gemm_fp8: block scales (", mode_name(a), " x ", mode_name(b),
                           ") need cuBLAS 12.9+; built against ", CUBLAS_VERSION, ", loaded ", loaded));
  if (cc != 90)
    throw RuntimeError(
        cat("gemm_fp8: cuBLASLt's 1x128 / 128x128 block scales run on compute capability 9.0 "
            "(Hopper) only; device ",
            device, " is ", cc / 10, ".", cc % 10));
  if (a == Fp8ScaleMode::blk128 && b == Fp8ScaleMode::blk128)
    throw RuntimeError("gemm_fp8: cuBLASLt takes 128x128 blocks on one operand at most");
}

void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const void* value, size_t size,
         const char* what) {
  check_cublas(cublasLtMatmulDescSetAttribute(desc, attribute, value, size), what);
}

struct Fp8Key {
  Fp8Format a, b;
  Fp8ScaleMode a_mode, b_mode;
  DType d;
  int64_t m, n, k;
  int device;
  bool operator==(const Fp8Key&) const = default;
};

// The descriptors of one product and the heuristic's algorithms, best
// first; `used` is the first that ran (an algorithm the call refuses as not
// supported passes the product to the next). The scale pointers are set per
// call.
constexpr int kFp8Algorithms = 8;
struct Fp8Plan {
  MatmulDesc desc;
  Layout lt_a, lt_b, lt_d;
  std::vector<cublasLtMatmulHeuristicResult_t> choices;
  mutable size_t used = 0;
};

// cuBLASLt's A is our b: its scales are b's. Set before the heuristic as
// well, as TransformerEngine and PyTorch do: with them set only at the call,
// an H200 refused the per-tensor product at 4096^3 (CUBLAS_STATUS_NOT_SUPPORTED)
// and the heuristic offered no block-scaled algorithm at all.
void set_scale_pointers(cublasLtMatmulDesc_t desc, const float* a_scales, const float* b_scales) {
  set(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scales, sizeof(b_scales), "A_SCALE_POINTER");
  set(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scales, sizeof(a_scales), "B_SCALE_POINTER");
}

Fp8Plan plan_for(const Fp8Key& key, const float* a_scales, const float* b_scales) {
  Fp8Plan plan;
  cublasLtMatmulDesc_t desc = nullptr;
  check_cublas(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  plan.desc.reset(desc);
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t), "TRANSA");
  set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n), "TRANSB");
  // cuBLASLt's A is our b (the column-major view), its B our a.
  const cublasLtMatmulMatrixScale_t mode_lt_a = lt_mode(key.b_mode), mode_lt_b = lt_mode(key.a_mode);
  set(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_lt_a, sizeof(mode_lt_a), "A_SCALE_MODE");
  set(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_lt_b, sizeof(mode_lt_b), "B_SCALE_MODE");
  set_scale_pointers(desc, a_scales, b_scales);
  // D^T [n, m] = (b [n, k], k contiguous: column-major [k, n], read transposed) x (a: column-major [k, m]).
  plan.lt_a = lt_layout(fp8_type(key.b), key.k, key.n, key.k);
  plan.lt_b = lt_layout(fp8_type(key.a), key.k, key.m, key.k);
  plan.lt_d = lt_layout(key.d == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F, key.n, key.m, key.n);
  const Preference preference = lt_preference();
  int found = 0;
  plan.choices.resize(kFp8Algorithms);
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt_handle(), desc, plan.lt_a.get(), plan.lt_b.get(), plan.lt_d.get(),
                                     plan.lt_d.get(), preference.get(), kFp8Algorithms, plan.choices.data(), &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0)
    throw RuntimeError(cat("gemm_fp8: cuBLASLt has no FP8 algorithm for ", key.m, " x ", key.n, " x ", key.k, " (",
                           fp8_info(key.a).name, " ", mode_name(key.a_mode), " x ", fp8_info(key.b).name, " ",
                           mode_name(key.b_mode), " -> ", dtype_name(key.d), "; heuristic status ",
                           static_cast<int>(status), ")"));
  plan.choices.resize(static_cast<size_t>(found));
  return plan;
}

// The scale mode that carries t's blocks, t entering a gemm along
// reduce_along_cols: one scale for the pair when both are per-tensor;
// otherwise 128x128 tiles as blk128 (on one operand), and anything constant
// over each 128-aligned run along the reduction (1x128 runs, a whole
// tensor, the other operand's tiles) as vec128.
Fp8ScaleMode scale_mode(const Fp8Tensor& t, bool reduce_along_cols, bool both_per_tensor, bool blk_taken) {
  if (both_per_tensor) return Fp8ScaleMode::tensor;
  const int64_t along_k = reduce_along_cols ? t.blocks.cols : t.blocks.rows,
                across_k = reduce_along_cols ? t.blocks.rows : t.blocks.cols, k = reduce_along_cols ? t.cols : t.rows;
  if (along_k == kScaleBlock && across_k == kScaleBlock && !blk_taken) return Fp8ScaleMode::blk128;
  if (along_k % kScaleBlock == 0 || along_k >= k) return Fp8ScaleMode::vec128;
  throw RuntimeError(cat("gemm_fp8 on CUDA: blocks of ", t.blocks.rows, " x ", t.blocks.cols,
                         " are not cuBLASLt's 1x128 or 128x128 (MXFP8's 1x32 blocks with E8M0 scales need "
                         "Blackwell's VEC32_UE8M0 mode, not wired)"));
}

// t's decode scales in mode's layout over t laid out k-major as [outer_p, k_p]
// (gemm_fp8_cublaslt.h); blocks wholly in the padding get 1. square: each
// scale squared (the planted fault fp8_scale_inverse_twice).
std::vector<float> lt_scales(const Fp8Tensor& t, bool reduce_along_cols, Fp8ScaleMode mode, int64_t outer_p,
                             int64_t k_p, bool square) {
  const int64_t outer = reduce_along_cols ? t.rows : t.cols, k = reduce_along_cols ? t.cols : t.rows;
  // The decode scale of the element at (outer index o, reduction index kk), 1 in the padding.
  auto at = [&](int64_t o, int64_t kk) {
    if (o >= outer || kk >= k) return 1.0f;
    const float s = reduce_along_cols ? t.scale_inv_at(o, kk) : t.scale_inv_at(kk, o);
    return square ? s * s : s;
  };
  std::vector<float> out;
  switch (mode) {
    case Fp8ScaleMode::tensor: out = {at(0, 0)}; break;
    case Fp8ScaleMode::vec128: {
      const int64_t ld = round_up(outer_p, 4), kb_count = k_p / kScaleBlock;
      out.assign(static_cast<size_t>(kb_count * ld), 1.0f);
      for (int64_t kb = 0; kb < kb_count; ++kb)
        for (int64_t o = 0; o < outer_p; ++o) out[static_cast<size_t>(kb * ld + o)] = at(o, kb * kScaleBlock);
      break;
    }
    case Fp8ScaleMode::blk128: {
      const int64_t kb_count = k_p / kScaleBlock, ld = round_up(kb_count, 4), ob_count = outer_p / kScaleBlock;
      out.assign(static_cast<size_t>(ob_count * ld), 1.0f);
      for (int64_t ob = 0; ob < ob_count; ++ob)
        for (int64_t kb = 0; kb < kb_count; ++kb)
          out[static_cast<size_t>(ob * ld + kb)] = at(ob * kScaleBlock, kb * kScaleBlock);
      break;
    }
  }
  return out;
}

}  // namespace

int64_t fp8_size_multiple(Fp8ScaleMode a, Fp8ScaleMode b) {
  return a == Fp8ScaleMode::tensor && b == Fp8ScaleMode::tensor ? kFp8Align : kScaleBlock;
}

void fp8_matmul_tn_scaled(const Fp8DeviceOperand& a, const Fp8DeviceOperand& b, void* d, DType d_dtype, int64_t m,
                          int64_t n, int64_t k) {
  const int64_t multiple = fp8_size_multiple(a.mode, b.mode);
  if (m % multiple || n % multiple || k % multiple)
    throw RuntimeError(cat("fp8_matmul_tn_scaled: ", m, " x ", n, " x ", k, " must be multiples of ", multiple, " (",
                           mode_name(a.mode), " x ", mode_name(b.mode), ")"));
  if (d_dtype != DType::f32 && d_dtype != DType::bf16)
    throw RuntimeError("fp8_matmul_tn: D must be f32 or bf16, got " + dtype_name(d_dtype));
  int device = 0;
  SEXTANT_CHECK_CUDA(cudaGetDevice(&device));
  const Fp8Key key{a.format, b.format, a.mode, b.mode, d_dtype, m, n, k, device};
  thread_local Memo<Fp8Key, Fp8Plan> plans(64);
  const Fp8Plan& plan = plans.get(key, [&] {
    require_fp8_support(device, a.mode, b.mode);
    return plan_for(key, a.scales, b.scales);
  });
  set_scale_pointers(plan.desc.get(), a.scales, b.scales);
  const float alpha = 1, beta = 0;
  cublasStatus_t status = CUBLAS_STATUS_NOT_SUPPORTED;
  for (; plan.used < plan.choices.size(); ++plan.used) {
    status = cublasLtMatmul(lt_handle(), plan.desc.get(), &alpha, b.codes, plan.lt_a.get(), a.codes, plan.lt_b.get(),
                            &beta, d, plan.lt_d.get(), d, plan.lt_d.get(), &plan.choices[plan.used].algo,
                            lt_workspace(), kLtWorkspaceBytes, compute_stream());
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) break;
  }
  check_cublas(status, plan.used < plan.choices.size() ? "cublasLtMatmul (FP8)"
                                                       : "cublasLtMatmul (FP8): every algorithm the heuristic offered");
}

float gemm_fp8(const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b, Tensor& c) {
  const int64_t m = trans_a ? a.cols : a.rows, k = trans_a ? a.rows : a.cols, n = trans_b ? b.rows : b.cols;
  // a [m, k] reduces along its columns unless transposed; b [k, n] along its rows unless transposed.
  const bool a_along_cols = !trans_a, b_along_cols = trans_b;
  const bool both_per_tensor = a.scale_inv.size() == 1 && b.scale_inv.size() == 1;
  const Fp8ScaleMode a_mode = scale_mode(a, a_along_cols, both_per_tensor, false);
  const Fp8ScaleMode b_mode = scale_mode(b, b_along_cols, both_per_tensor, a_mode == Fp8ScaleMode::blk128);
  const int64_t multiple = fp8_size_multiple(a_mode, b_mode);
  const int64_t mp = round_up(m, multiple), np = round_up(n, multiple), kp = round_up(k, multiple);
  const std::vector<uint8_t> a_codes = k_major(a, a_along_cols, mp, kp), b_codes = k_major(b, b_along_cols, np, kp);
  // The planted fault: A's values multiplied by their decode scales twice.
  const bool twice = kernel_fault_planted(KernelFault::fp8_scale_inverse_twice);
  const std::vector<float> a_scales = lt_scales(a, a_along_cols, a_mode, mp, kp, twice),
                           b_scales = lt_scales(b, b_along_cols, b_mode, np, kp, false);
  DeviceBytes da(a_codes.size()), db(b_codes.size()), dsa(a_scales.size() * sizeof(float)),
      dsb(b_scales.size() * sizeof(float));
  da.upload(a_codes.data(), a_codes.size());
  db.upload(b_codes.data(), b_codes.size());
  dsa.upload(a_scales.data(), a_scales.size() * sizeof(float));
  dsb.upload(b_scales.data(), b_scales.size() * sizeof(float));
  const size_t elem = dtype_size(c.dtype());
  DeviceBytes dd(static_cast<size_t>(mp * np) * elem);
  fp8_matmul_tn_scaled({da.get(), a.format, a_mode, static_cast<const float*>(dsa.get())},
                       {db.get(), b.format, b_mode, static_cast<const float*>(dsb.get())}, dd.get(), c.dtype(), mp, np,
                       kp);
  // The padded D [mp, np] row-major, cut to C [m, n].
  SEXTANT_CHECK_CUDA(cudaMemcpy2DAsync(c.raw(), static_cast<size_t>(n) * elem, dd.get(), static_cast<size_t>(np) * elem,
                                       static_cast<size_t>(n) * elem, static_cast<size_t>(m), cudaMemcpyDeviceToDevice,
                                       compute_stream()));
  SEXTANT_CHECK_CUDA(cudaStreamSynchronize(compute_stream()));  // the buffers above leave with this call
  // C's amax as stored: cuBLASLt's AMAX_D pointer serves FP8 outputs; C here is f32 or bf16.
  return fp8_amax(c.to(Device::host));
}

}  // namespace sextant::ops::cuda
