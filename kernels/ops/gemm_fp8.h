// FP8 gemm: C = op(A) op(B) from operands quantized by a recipe
// (fp8_recipe.h), products and sums in f32, C stored in its dtype (f32 or
// bf16). The three gemms of an FP8 linear Y = X W (X [tokens, in], W [in,
// out]), each operand quantized along that gemm's reduction:
//   forward  Y  = X W      X activation (E4M3), W weight (E4M3)
//   dgrad    dX = dY W^T   dY gradient (E5M2 under hybrid), W weight
//   wgrad    dW = X^T dY   X activation, dY gradient
// Host: each operand dequantized to f32 (code value x its block's decode
// scale) and one OpenBLAS f32 gemm. CUDA (C on the device): cuBLASLt's FP8
// matmul with per-tensor scales (cuda/gemm_fp8_cublaslt.cc).
#pragma once

#include "harness/tensor.h"
#include "kernels/ops/fp8_recipe.h"

namespace sextant::ops {

// a: [m, k] ([k, m] if trans_a), b: [k, n] ([n, k] if trans_b), c: [m, n]
// f32 or bf16, written in place (on the host, or on the device: CUDA). Returns the amax of C as stored (what cuBLASLt's
// AMAX_D pointer reports, for a recipe that scales C next).
float gemm_fp8(const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b, Tensor& c);

}  // namespace sextant::ops
