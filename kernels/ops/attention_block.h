// Attention on one (query block, key/value block) pair, forward and backward,
// with the log-sum-exp (LSE) of every query row so that partial results over
// several key blocks merge exactly (FlashAttention; TE context_parallel.py).
//
//   S = scale * Q K^T, scale = 1/sqrt(d_qk), masked entries -inf
//   O = softmax(S) V,  LSE_i = log sum_j exp(S_ij)
// Backward from (Q, K, V, O, LSE, dO), with D_i = rowsum(dO * O)_i:
//   P = exp(S - LSE); dV = P^T dO; dP = dO V^T; dS = P * (dP - D);
//   dQ = scale dS K;  dK = scale dS^T Q.
//
// Layout BSHD: q [b, sq, hq, d], k [b, sk, hk, d] and v [b, sk, hk, dv] with
// hk dividing hq (grouped-query attention: query head h reads kv head
// h / (hq / hk)). d is the head dim of q and k, dv that of v, out and dout:
// equal but for multi-head latent attention (MLA, DeepSeek-V2/V3: 192, 128).
// LSE and D are [b, hq, sq] in f32. Storage f32, bf16 or f16; compute and
// accumulation in f32.
//
// Host: the score matrix is walked in tiles through ops::gemm_f32 on
// sub-matrices with an online softmax, so memory is O(tile), never O(sq*sk).
// Tiles that the causal mask hides completely are skipped, which is what
// makes a zigzag-sharded ring do half a block of work per step.
// A sliding window (attention_mask.h) skips the tiles wholly outside every
// query's window the same way; cuDNN's path (AttentionImpl::cudnn) hands
// windowed blocks to our kernels, as its pieces know only the diagonal.
// CUDA (kernels/ops/cuda/attention*.cu): the same functions on device
// tensors (q, k, v, dout of one dtype): a flash-style tensor-core kernel for
// bf16 / f16 with head_dim <= 128 and d = dv (P and dS rounded to 16 bits
// before their products, as FlashAttention does), f32 math on CUDA cores
// otherwise;
// fully masked 64 x 64 tiles are skipped the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/tensor.h"
#include "kernels/ops/attention_impl.h"
#include "kernels/ops/attention_mask.h"

namespace sextant::ops {

struct AttentionOut {
  Tensor out;          // [b, sq, hq, dv] in the requested dtype
  Tensor lse;          // [b, hq, sq] f32; -inf for rows that see no key (their out is 0)
  int64_t scores = 0;  // score entries computed (b * hq * the entries of unmasked tiles)
};

// The scale of the scores, 1/sqrt(d) of the q/k head dim (d_v plays no
// part), rounded to f32 once: the host op, our CUDA kernels and cuDNN's.
float attention_scale(int64_t d, int64_t dv);

// q: [b, sq, hq, d]; k: [b, sk, hk, d]; v: [b, sk, hk, dv]. out in out_dtype (f32 to merge).
AttentionOut attention_block_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                                     DType out_dtype = DType::f32, AttentionImpl impl = AttentionImpl::own);

// D = rowsum(dout * out). out, dout: [b, sq, hq, dv] -> [b, hq, sq] f32.
Tensor attention_delta(const Tensor& out, const Tensor& dout);

// Adds this block's gradients into f32 accumulators:
//   dq: [b, sq, hq, d], dk: [b, sk, hk, d], dv: [b, sk, hk, dv] (all f32).
// out, dout: [b, sq, hq, dv], lse and delta: [b, hq, sq] f32, the final values over
// all key blocks (our kernels read delta, cuDNN's recompute it from out).
// Returns the score entries computed (as AttentionOut::scores).
int64_t attention_block_backward_accumulate(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                            const Tensor& dout, const Tensor& lse, const Tensor& delta,
                                            const AttentionMask& mask, Tensor& dq, Tensor& dk, Tensor& dv,
                                            AttentionImpl impl = AttentionImpl::own);

struct AttentionGrads {
  Tensor dq, dk, dv;  // f32: [b, sq, hq, d], [b, sk, hk, d], [b, sk, hk, dv]
};
// Whole-block backward: gradients of one block given its own out and lse.
AttentionGrads attention_block_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                        const Tensor& lse, const Tensor& dout, const AttentionMask& mask,
                                        AttentionImpl impl = AttentionImpl::own);

// Merges a partial result (out_b, lse_b) into (out, lse), in place, stably:
//   lse' = max + log1p(exp(min - max)),  out' = out - sigmoid(lse_b - lse) (out - out_b)
// (= exp(lse - lse') out + exp(lse_b - lse') out_b, without its cancellation at large lse).
// A row with lse_b = -inf leaves (out, lse) alone; both -inf stays -inf with out 0.
// out, out_b: [b, sq, h, d] f32; lse, lse_b: [b, h, sq] f32.
void attention_merge(Tensor& out, Tensor& lse, const Tensor& out_b, const Tensor& lse_b);
// The same merge of a partial result over rows [row0, row0 + s_b) of out:
// out_b: [b, s_b, h, d] in any dtype, lse_b: [b, h, s_b] f32.
void attention_merge_rows(Tensor& out, Tensor& lse, int64_t row0, const Tensor& out_b, const Tensor& lse_b);

}  // namespace sextant::ops
