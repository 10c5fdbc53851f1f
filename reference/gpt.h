// A decoder-only GPT on one device in float64, written plainly from the other
// reference pieces: the whole global batch, full-sequence causal attention,
// a per-token MoE loop, and Adam. The 6D step suite checks every loss,
// gradient and parameter of the distributed model against it.
//
//   x0 = E[tokens]                                         [B, s, h]
//   for each layer l:
//     a  = LN1(x); qkv = a Wqkv + bqkv                     Wqkv [h, (H + K) d + K dv], columns
//                                                            (KV group, {H/K query heads, k (d), v (dv)})
//     o  = attention(q, k, v, causal)                      [B, s, H, dv]; query head h reads KV head h / (H/K)
//     x  = x + o Wo + bo                                   Wo [H dv, h], rows (head, dv)
//     x  = x + MLP(LN2(x))   (dense: W1 [h, ffn] + b1, gelu, W2 [ffn, h] + b2)
//       or x + MoE(LN2(x))   (router [h, E], experts W1 [E, h, f], W2 [E, f, h])
//   logits = LNf(x) Whead                                  Whead [h, V]
//   loss = mean over the B s positions (that have a target) of CE(logits, next token)
// Packed rows (seq_lens): every row holds several sequences one after
// another and attention runs on each sequence alone (reference/
// packed_attention.h); inputs and targets then come apart, each sequence
// with its own next tokens. The model has no position embeddings, so
// nothing else restarts per sequence. With padding (seq_rows) the padding
// rows are cut out before attention and get zeros from it; their targets
// are ignored (cross_entropy.h's kIgnoreTarget), so the loss is the mean
// over the real tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "harness/tensor.h"
#include "reference/adam.h"
#include "reference/moe.h"

namespace sextant::ref {

struct GptDims {
  int64_t vocab = 0, hidden = 0, heads = 0, head_dim = 0, ffn = 0, layers = 0, seq = 0;
  int64_t kv_heads = 0;    // GQA: query head h reads KV head h / (heads / kv_heads); 0: heads (MHA)
  int64_t v_head_dim = 0;  // of v and o (MLA: dv != d); 0: head_dim
  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t dv() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
  std::vector<int64_t> seq_lens;  // packed rows: lengths summing to seq; empty: one sequence
  // Packed rows with padding: the rows each sequence occupies (its tokens,
  // then its padding), rows past the last one tail padding; empty: no padding.
  std::vector<int64_t> seq_rows;
  int64_t window = -1;  // causal sliding window of the attention (within each sequence); -1: none
  MoeConfig moe;        // used by the layers with is_moe
  double eps = 1e-5;
};

// One layer's parameters; the dense MLP fields or the MoE ones are set.
struct GptLayer {
  bool is_moe = false;
  Tensor ln1_gamma, ln1_beta, wqkv, bqkv, wo, bo, ln2_gamma, ln2_beta;
  Tensor w1, b1, w2, b2;           // dense MLP
  MoeParams moe;                   // router [h, E], w1 [E, h, f], w2 [E, f, h]
  std::vector<Tensor*> tensors();  // every defined parameter, in a fixed order
};

struct GptParams {
  Tensor embedding;  // [V, h]
  std::vector<GptLayer> layers;
  Tensor lnf_gamma, lnf_beta;      // [h]
  Tensor head;                     // [h, V]
  std::vector<Tensor*> tensors();  // every parameter, in a fixed order
  GptParams zeros_like() const;    // f64 zeros of the same shapes
};

struct GptStep {
  double loss = 0;
  GptParams grads;                  // d loss / d every parameter (f64)
  std::vector<MoeRouting> routing;  // per MoE layer, in layer order: the forward's routing
};

// tokens: [B, s + 1] row-major ids; inputs are tokens[:, :s], targets tokens[:, 1:].
GptStep gpt_forward_backward(const GptDims& dims, const GptParams& params, std::span<const int64_t> tokens,
                             int64_t batch);
double gpt_loss(const GptDims& dims, const GptParams& params, std::span<const int64_t> tokens, int64_t batch);
// Another run's routing to follow at near ties (MoeConfig::follow): per MoE
// layer, in layer order, [B s * k] expert ids.
struct RoutingFollow {
  std::vector<std::vector<int>> expert;
  double tie_band = 0;
};

// inputs, targets: [B, s] row-major ids (packed rows give them apart).
GptStep gpt_forward_backward(const GptDims& dims, const GptParams& params, std::span<const int64_t> inputs,
                             std::span<const int64_t> targets, int64_t batch, const RoutingFollow* follow = nullptr);
double gpt_loss(const GptDims& dims, const GptParams& params, std::span<const int64_t> inputs,
                std::span<const int64_t> targets, int64_t batch);

// Adam on every parameter (f64 state, created on first use).
struct GptAdam {
  AdamConfig config;
  int64_t step = 0;
  GptParams m, v;
};
void gpt_adam_step(GptParams& params, GptParams& grads, GptAdam& state);

}  // namespace sextant::ref
