// The projections of a pre-LN self-attention sublayer under TP (+ SP), with
// the core attention left to the caller (CP attention in a model; a
// token-local stand-in in suites/tp_sp):
//   ln      = LayerNorm(x)                     x: [b, s/tp | s, h]
//   q, k, v = split(ln Wqkv + bqkv)            q, k [b, s, heads/tp | kv/tp, d], v [b, s, kv/tp, dv] (column-parallel)
//   o       = core(q, k, v)                    [b, s, heads/tp, dv]       (the caller's)
//   y       = o Wo + bo                        [b, s/tp | s, h]           (row-parallel, by heads)
// and the caller adds the residual x + y. d is the query/key head dim, dv
// the value head dim (dv != d: DeepSeek's MLA shapes, 192 and 128).
//
// Layouts. Wqkv is [h, (heads + kv) d + kv dv] with its output columns
// ordered (KV group, {the group's heads/kv query heads (d each), k (d), v
// (dv)}) -- Megatron's interleaved layout; with kv = heads (MHA) it is
// (head, {q, k, v}) -- so that a contiguous column block is whole groups:
// rank r holds groups [r kv/tp, (r+1) kv/tp) and their query heads. Query
// head j reads KV head j / (heads/kv). Wo is [heads dv, h] with rows ordered
// (head, dv); rank r holds its query heads' rows Wo_r [heads/tp dv, h]. bo
// [h] is replicated.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/tensor_parallel/layernorm.h"
#include "kernels/tensor_parallel/linear.h"

namespace sextant::tp {

struct AttentionDims {
  int64_t hidden = 0, heads = 0, head_dim = 0;  // heads * head_dim need not equal hidden
  int64_t kv_heads = 0;                         // GQA; 0: heads (MHA)
  int64_t v_head_dim = 0;                       // of v and o (MLA); 0: head_dim
  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t dv() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
  // Columns of Wqkv, and rows of Wo.
  int64_t qkv_width() const { return (heads + kv()) * head_dim + kv() * dv(); }
  int64_t out_width() const { return heads * dv(); }
};

struct AttentionProjWeights {
  Tensor ln_gamma, ln_beta;  // [h], replicated
  ColumnParallelLinear qkv;  // w [h, ((heads + kv) d + kv dv)/tp], b [((heads + kv) d + kv dv)/tp]
  RowParallelLinear out;     // w [heads/tp dv, h], b [h] replicated
  int64_t local_heads = 0, local_kv_heads = 0, head_dim = 0, v_head_dim = 0;
};

struct AttentionProjGrads {
  Tensor ln_gamma, ln_beta;
  LinearGrads qkv, out;
  std::vector<Tensor*> replicated_over_tp() { return {&ln_gamma, &ln_beta, &out.db}; }
  std::vector<Tensor*> all() { return {&ln_gamma, &ln_beta, &qkv.dw, &qkv.db, &out.dw, &out.db}; }
};

struct Qkv {
  Tensor q;  // [b, s, heads/tp, d]
  Tensor k;  // [b, s, kv/tp, d]
  Tensor v;  // [b, s, kv/tp, dv]
};

// Held between forward and backward (the core's own activations are the caller's).
struct AttentionProjSaved {
  LayerNormSaved ln;  // the LayerNorm region
  ColumnSaved qkv;    // ln output (gathered, or its shard under SP + regather)
  RowSaved out;       // o [b, s, heads/tp dv]
  size_t bytes() const { return ln.bytes() + qkv.bytes() + out.bytes(); }
  size_t layernorm_bytes() const { return ln.bytes(); }
};

// x: [b, s/tp, h] (SP) or [b, s, h] -> q, k, v of this rank's groups.
Qkv qkv_forward(const TpGroup& g, const AttentionProjWeights& w, const Tensor& x, AttentionProjSaved& saved);
// dq, dk, dv: like q, k, v -> dx of the LayerNorm branch: like x (the
// caller adds the residual's gradient). Writes grads.ln_*, grads.qkv.
Tensor qkv_backward(const TpGroup& g, const AttentionProjWeights& w, const AttentionProjSaved& saved, const Qkv& dqkv,
                    AttentionProjGrads& grads);
// o: [b, s, heads/tp, dv] -> y: [b, s/tp | s, h] (summed over TP, plus bo).
Tensor out_proj_forward(const TpGroup& g, const AttentionProjWeights& w, const Tensor& o, AttentionProjSaved& saved);
// dy: like y -> do: [b, s, heads/tp, dv]. Writes grads.out (db partial under SP).
Tensor out_proj_backward(const TpGroup& g, const AttentionProjWeights& w, const AttentionProjSaved& saved,
                         const Tensor& dy, AttentionProjGrads& grads);

// [b, s, (heads + kv) d + kv dv] (columns (group, {q heads, k, v})) <-> q [b,
// s, heads, d], k [b, s, kv, d], v [b, s, kv, dv]; merge_qkv reads the
// sizes from the parts. On the host or a device alike.
Qkv split_qkv(const Tensor& packed, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t v_head_dim);
Tensor merge_qkv(const Qkv& parts);

// Runs the QKV and output projections in FP8 under `recipe` from fresh
// state (fp8_linear.h).
void use_fp8_linears(AttentionProjWeights& w, const ops::Fp8Recipe& recipe);

// Shards of deterministic random weights named prefix + ".ln_gamma",
// ".ln_beta", ".wqkv", ".bqkv", ".wo", ".bo" (scales: 1, 1, 1/sqrt(h), 0.1,
// 1/sqrt(heads dv), 0.1). tp_size 1 gives the whole tensors. On `device`.
AttentionProjWeights init_attention_proj_weights(const AttentionDims& dims, int tp_rank, int tp_size, DType dtype,
                                                 uint64_t seed, const std::string& prefix,
                                                 Device device = Device::host);

// Matrix-product FLOPs of forward + backward of both projections on `tokens` tokens.
inline double attention_proj_flops(int64_t tokens, const AttentionDims& d) {
  return 3 * 2.0 * tokens * d.hidden * static_cast<double>(d.qkv_width() + d.out_width());
}

}  // namespace sextant::tp
