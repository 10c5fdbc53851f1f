// Declarations of the CUDA implementations of kernels/ops (defined in
// kernels/ops/cuda/*.cu, compiled only in CUDA builds). Each mirrors the
// host op of the same name; callers go through the dispatching op, which has
// already checked shapes and that every operand is on the device.
//
// Storage: the activations of one call (x, y, dy, dx; logits and dlogits;
// q, k, v, dout) share one dtype, f64 / f32 / bf16 / f16, and compute in f32
// (f64 for f64); parameters (gamma, beta, bias) and their gradients may have
// dtypes of their own. Statistics (mean, rstd, max, sum_exp, lse) are in the
// compute dtype. Every kernel runs on the compute stream (cuda_common.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "harness/rng.h"
#include "harness/tensor.h"
#include "kernels/ops/attention_mask.h"

namespace sextant::ops {
struct Fp8Tensor;      // fp8_recipe.h
enum class Fp8Format;  // fp8.h
}  // namespace sextant::ops

namespace sextant::ops::cuda {

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha, float beta, int64_t m,
          int64_t n, int64_t k);
// gemm_fp8.h: the host operands' codes and per-tensor scales uploaded, C
// (f32 or bf16) on the device; returns C's amax.
float gemm_fp8(const Fp8Tensor& a, bool trans_a, const Fp8Tensor& b, bool trans_b, Tensor& c);
// The FP8 product alone, on device buffers: cuda/gemm_fp8_cublaslt.h.

// Fills out (a device tensor) with the block of the global tensor at offset,
// element for element what harness random_block gives (kernels/ops/random.h).
void random_fill(Tensor& out, const Shape& global, const Shape& offset, const RandomSpec& spec);

// layernorm.h. mean, rstd: [rows], written.
void layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, float eps, Tensor& mean,
                       Tensor& rstd);
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                        Tensor& dx, Tensor& dgamma, Tensor& dbeta);

// gelu.h, softmax.h.
void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx);
void softmax_forward(const Tensor& x, Tensor& y);
void softmax_backward(const Tensor& dy, const Tensor& y, Tensor& dx);

// cross_entropy.h: the per-row pieces, out: [rows] in the compute dtype.
void cross_entropy_row_max(const Tensor& logits, Tensor& out);
void cross_entropy_sum_exp(const Tensor& logits, const Tensor& row_max, Tensor& out);
void cross_entropy_target_logit(const Tensor& logits, std::span<const int64_t> targets, int64_t vocab_start,
                                Tensor& out);
// targets: empty, or per row (kIgnoreTarget: loss 0).
void cross_entropy_row_loss(const Tensor& max, const Tensor& sum_exp, const Tensor& target_logit,
                            std::span<const int64_t> targets, Tensor& out);
// dlogits[r, j] = w * exp(logits[r, j] - max[r]) / sum_exp[r] - w [vocab_start + j == targets[r]],
// and 0 on a row whose target is kIgnoreTarget.
void cross_entropy_backward(const Tensor& logits, std::span<const int64_t> targets, const Tensor& max,
                            const Tensor& sum_exp, double w, Tensor& dlogits, int64_t vocab_start);

// bias.h.
void bias_add(const Tensor& x, const Tensor& bias, Tensor& y);
void bias_backward(const Tensor& dy, Tensor& dbias);

// adam.h: the scalars of one step, derived in f64 and rounded to f32 once by
// the host op (adam.cc says why).
struct AdamScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, step_size, inv_sqrt_bc2, decay, eps;
};
void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamScalars& s);

// attention_block.h. out: [b, sq, hq, d] f32 and lse: [b, hq, sq] f32, written.
// Return the score entries computed (as AttentionOut::scores).
int64_t attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask, Tensor& out,
                          Tensor& lse);
void attention_delta(const Tensor& out, const Tensor& dout, Tensor& delta);
int64_t attention_backward_accumulate(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                      const Tensor& lse, const Tensor& delta, const AttentionMask& mask, Tensor& dq,
                                      Tensor& dk, Tensor& dv);
void attention_merge_rows(Tensor& out, Tensor& lse, int64_t row0, const Tensor& out_b, const Tensor& lse_b);
// attention_pieces.cc: acc[:, row0 + i] += x[:, i], acc f32 [b, s, ...], x [b, s_x, ...].
void add_rows(Tensor& acc, int64_t row0, const Tensor& x);

// The same block functions through cuDNN's fused attention (attention_cudnn.cc):
// the block is cut into attention_pieces, each one fused call, merged by LSE
// (forward_by_pieces, backward_by_pieces).
// q, k, v (and dout) bf16 or f16 with cudnn::supports(head_dim). The backward
// reads the final out (any dtype; cuDNN takes it in q's dtype), from which
// cuDNN computes delta itself; delta serves the pieces cuDNN does not take.
int64_t attention_forward_cudnn(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                                Tensor& out, Tensor& lse);
int64_t attention_backward_accumulate_cudnn(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                            const Tensor& dout, const Tensor& lse, const Tensor& delta,
                                            const AttentionMask& mask, Tensor& dq, Tensor& dk, Tensor& dv);

// Data movement and element-wise helpers behind the device paths of the
// parallel kernels (kernels/attention, kernels/tensor_parallel).
// out (allocated, [view[order[0]], ...]) = x viewed as `view` with its dims
// reordered; the last dim stays last (kernels/attention/permute.h).
void permute_rows(const Tensor& x, const Shape& view, const std::vector<int>& order, Tensor& out);
// y += x (same shape and dtype), computed in f32 (f64 for f64), rounded once.
void add_into(Tensor& y, const Tensor& x);
// out = a * b (+ c when c is defined), same shapes and dtype; multiply and add
// rounded separately in f32 (f64), as a host loop without contraction does.
void mul_add(const Tensor& a, const Tensor& b, const Tensor& c, Tensor& out);
// Embedding lookup: out [tokens, h] row t = table [rows, h] row ids[t] - first
// where that row is in the table; rows of other ids are left as they are.
void gather_rows(const Tensor& table, std::span<const int64_t> ids, int64_t first, Tensor& out);
// Embedding gradient: sums [rows, h] (f32 or f64) row ids[t] - first += grad
// [tokens, h] row t, for the ids in the table (atomic adds: order not fixed).
void scatter_add_rows(const Tensor& grad, std::span<const int64_t> ids, int64_t first, Tensor& sums);

// MoE token rows (kernels/moe/permute.h; moe_rows.cu). scale: [rows of the
// scaled tensor] f32 on the device, or undefined for no scaling.
// out [rows, h] row r = scale[r] * x row src[r] (f32 product, rounded once).
void moe_gather_rows(const Tensor& x, std::span<const int64_t> src, const Tensor& scale, Tensor& out);
// out [tokens, h] row t = sum of scale[ids[j]] * rows row ids[j] over j in
// [offsets[t], offsets[t + 1]), in j order, in f32, rounded once (no atomics).
void moe_combine_rows(const Tensor& rows, std::span<const int64_t> offsets, std::span<const int64_t> ids,
                      const Tensor& scale, Tensor& out);
// dots [rows] f32: dots[r] = <a row a_rows[r], b row r>, in f32.
void moe_row_dots(const Tensor& a, std::span<const int64_t> a_rows, const Tensor& b, Tensor& dots);

}  // namespace sextant::ops::cuda
