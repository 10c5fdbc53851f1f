// One pre-LN transformer layer of the GPT under TP x SP x CP (x EP for MoE),
// forward and backward side by side, the backward split into I (input
// gradient) and W (weight gradients) for zero-bubble schedules:
//
//   a  = LN1(x)                              x, a: [b, s/tp | s, h]   (SP: sequence shard)
//   q, k, v = split(a Wqkv + bqkv)           [b, s, H/tp | K/tp, d | dv] column-parallel by KV groups
//   o  = attention(q, k, v)                  [b, s, H/tp, dv]         causal, over CP (s = seq/cp rows)
//   x' = x + o Wo + bo                       [b, s/tp | s, h]         row-parallel, residual
//   y  = x' + MLP(LN2(x'))                   dense: column W1, gelu, row W2
//     or x' + MoE(LN2(x'))                   router + experts over EP x ETP (kernels/moe)
//
// Every (layer, microbatch) keeps its own activations between F and B/I
// and the products W needs between I and W; MoE layers keep one MoeLayer per
// microbatch, since a pipeline has several microbatches in flight. The MoE
// backward cannot be split (kernels/moe computes expert gradients with the
// input gradient), so a MoE layer's W covers only its attention.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kernels/attention/cp_attention.h"
#include "kernels/model/gpt_config.h"
#include "kernels/moe/moe_layer.h"
#include "kernels/tensor_parallel/attention_proj.h"
#include "kernels/tensor_parallel/layernorm.h"

namespace sextant::model {

// One layer's shards on this rank; the tensors share storage with the parameter store.
struct LayerWeights {
  tp::AttentionProjWeights attn;  // ln1, Wqkv / bqkv (KV groups/tp), Wo (heads/tp rows), bo
  Tensor ln2_gamma, ln2_beta;     // [h]
  tp::ColumnParallelLinear fc1;   // dense: w [h, ffn/tp], b [ffn/tp]
  tp::RowParallelLinear fc2;      // dense: w [ffn/tp, h], b [h]
  moe::MoeWeights moe;            // MoE: router [h, E], local experts [h, f/etp], [f/etp, h]
};

// f32 gradient accumulators shaped like LayerWeights (summed over microbatches).
struct LayerGrads {
  Tensor ln1_gamma, ln1_beta, wqkv, bqkv, wo, bo, ln2_gamma, ln2_beta;
  Tensor w1, b1, w2, b2;                     // dense
  Tensor router;                             // MoE
  std::vector<Tensor> expert_w1, expert_w2;  // MoE, per local expert
};

struct LayerEnv {
  const tp::TpGroup* tp = nullptr;
  cp::Comms cp;
  cp::Options cp_options;
  moe::MoeOptions moe_options;
  moe::MoeComms moe_comms;
  int microbatches = 1;
  Recompute recompute = Recompute::none;  // GptConfig::recompute
  bool recompute_wrong_input = false;     // the planted fault recompute_wrong_input
  // Called between the attention and feed-forward sublayers (both ways):
  // lets pending data-parallel collectives advance (unit_hooks.h).
  std::function<void()> progress;
};

class GptLayer {
 public:
  GptLayer(int index, bool is_moe, const LayerEnv& env, LayerWeights weights, LayerGrads grads);

  int index() const { return index_; }
  bool is_moe() const { return is_moe_; }
  // x: [b, s/tp | s, h] -> like x. drop_residual plants the fault
  // stage_drops_residual: the attention sublayer forgets "x +".
  Tensor forward(int microbatch, const Tensor& x, bool drop_residual = false);
  // I: dy like the output -> dx like the input.
  Tensor backward_input(int microbatch, const Tensor& dy);
  // W: adds the weight gradients of the microbatch and frees its activations.
  void backward_weight(int microbatch);
  // MoE layers: the routing of the microbatch's last forward.
  const moe::Routing& routing(int microbatch) const;

  // FP8 linears (dense layers): QKV, the output projection, fc1 and fc2 run
  // their gemms in FP8 with fresh state under `recipe` (kernels/tensor_parallel/
  // fp8_linear.h); core attention, LayerNorms and MoE experts stay in the
  // model's dtype, as TransformerEngine's fp8_autocast leaves them.
  void use_fp8_linears(const ops::Fp8Recipe& recipe);
  // The end of a training step (every microbatch's W done): delayed scaling
  // rolls each linear's history once.
  void end_fp8_step();
  // Each FP8 linear by name, in kFp8LinearNames' order; empty without FP8.
  static constexpr const char* kFp8LinearNames[4] = {"qkv", "out", "fc1", "fc2"};
  std::vector<std::pair<std::string, const tp::Fp8LinearState*>> fp8_linears() const;

 private:
  struct Saved {
    tp::AttentionProjSaved attn;
    Tensor q, k, v, o, lse;  // core attention: [b, s, H/tp, d | dv], lse [b, H/tp, s]
    bool drop_residual = false;
    tp::LayerNormSaved ln2;
    tp::ColumnSaved fc1;
    Tensor a;  // [b, s, ffn/tp] before gelu
    tp::RowSaved fc2;
    // Kept from I for W.
    Tensor d_out_full, d_out, d_qkv, d_fc2_full, d_fc2, d_a;
    // Full recomputation: the layer's input, all the forward keeps.
    Tensor checkpoint;
  };
  // The forward into s: what forward() runs, and full recomputation again.
  Tensor forward_into(int microbatch, Saved& s, const Tensor& x);
  Tensor attention_forward(Saved& s, const Tensor& x);
  Tensor attention_backward_input(Saved& s, const Tensor& dy);
  Tensor mlp_forward(Saved& s, const Tensor& x);
  Tensor mlp_backward_input(Saved& s, const Tensor& dy);
  Tensor moe_forward(int microbatch, Saved& s, const Tensor& x);
  Tensor moe_backward_input(int microbatch, Saved& s, const Tensor& dy);
  // LN backward with its gamma / beta gradients added to the accumulators.
  Tensor layernorm_backward(const tp::LayerNormSaved& saved, const Tensor& gamma, const Tensor& dy, Tensor& dgamma,
                            Tensor& dbeta);

  int index_;
  bool is_moe_;
  LayerEnv env_;
  LayerWeights w_;
  LayerGrads g_;
  std::vector<Saved> saved_;                         // per microbatch
  std::vector<std::unique_ptr<moe::MoeLayer>> moe_;  // per microbatch
};

}  // namespace sextant::model
