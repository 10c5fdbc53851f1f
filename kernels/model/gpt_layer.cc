#include "kernels/model/gpt_layer.h"

#include <iterator>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/model/split_linear.h"
#include "kernels/ops/gelu.h"
#include "kernels/tensor_parallel/shard.h"

namespace sextant::model {

GptLayer::GptLayer(int index, bool is_moe, const LayerEnv& env, LayerWeights weights, LayerGrads grads)
    : index_(index), is_moe_(is_moe), env_(env), w_(std::move(weights)), g_(std::move(grads)) {
  saved_.resize(static_cast<size_t>(env.microbatches));
  if (!is_moe_) return;
  for (int mb = 0; mb < env.microbatches; ++mb)  // the weights' storage is shared, not copied
    moe_.push_back(std::make_unique<moe::MoeLayer>(env.moe_options, env.moe_comms, w_.moe));
}

Tensor GptLayer::forward(int mb, const Tensor& x, bool drop_residual) {
  Saved& s = saved_.at(static_cast<size_t>(mb));
  s = Saved{};
  s.drop_residual = drop_residual;
  Tensor y = forward_into(mb, s, x);
  if (env_.recompute == Recompute::full) {  // keep the input (a copy: the caller may reuse its buffer) alone
    Saved kept;
    kept.drop_residual = drop_residual;
    kept.checkpoint = (env_.recompute_wrong_input ? y : x).clone();
    s = std::move(kept);
  }
  return y;
}

Tensor GptLayer::forward_into(int mb, Saved& s, const Tensor& x) {
  const Tensor mid = attention_forward(s, x);
  if (env_.progress) env_.progress();
  return is_moe_ ? moe_forward(mb, s, mid) : mlp_forward(s, mid);
}

Tensor GptLayer::backward_input(int mb, const Tensor& dy) {
  Saved& s = saved_.at(static_cast<size_t>(mb));
  if (s.checkpoint.defined()) {  // full recomputation: the forward again, from the checkpoint
    const Tensor x = std::move(s.checkpoint);
    const bool drop_residual = s.drop_residual;
    s = Saved{};
    s.drop_residual = drop_residual;
    forward_into(mb, s, x);
  }
  const Tensor dmid = is_moe_ ? moe_backward_input(mb, s, dy) : mlp_backward_input(s, dy);
  if (env_.progress) env_.progress();
  return attention_backward_input(s, dmid);
}

void GptLayer::backward_weight(int mb) {
  Saved& s = saved_.at(static_cast<size_t>(mb));
  const tp::TpGroup& g = *env_.tp;
  if (!is_moe_) {
    row_backward_weight(g, w_.fc2, s.fc2, s.d_fc2_full, s.d_fc2, g_.w2, &g_.b2);
    column_backward_weight(g, w_.fc1, s.fc1, s.d_a, g_.w1, &g_.b1);
  }
  row_backward_weight(g, w_.attn.out, s.attn.out, s.d_out_full, s.d_out, g_.wo, &g_.bo);
  column_backward_weight(g, w_.attn.qkv, s.attn.qkv, s.d_qkv, g_.wqkv, &g_.bqkv);
  s = Saved{};
}

const moe::Routing& GptLayer::routing(int mb) const {
  if (!is_moe_) throw RuntimeError(cat("layer ", index_, " is dense: it has no routing"));
  return moe_.at(static_cast<size_t>(mb))->routing();
}

void GptLayer::use_fp8_linears(const ops::Fp8Recipe& recipe) {
  if (is_moe_) throw RuntimeError(cat("layer ", index_, " is MoE: FP8 linears are for dense layers"));
  tp::use_fp8_linears(w_.attn, recipe);
  w_.fc1.fp8 = std::make_shared<tp::Fp8LinearState>(recipe);
  w_.fc2.fp8 = std::make_shared<tp::Fp8LinearState>(recipe);
}

void GptLayer::end_fp8_step() {
  for (tp::Fp8LinearState* s : {w_.attn.qkv.fp8.get(), w_.attn.out.fp8.get(), w_.fc1.fp8.get(), w_.fc2.fp8.get()})
    if (s) tp::fp8_end_step(*s);
}

std::vector<std::pair<std::string, const tp::Fp8LinearState*>> GptLayer::fp8_linears() const {
  const tp::Fp8LinearState* states[] = {w_.attn.qkv.fp8.get(), w_.attn.out.fp8.get(), w_.fc1.fp8.get(),
                                        w_.fc2.fp8.get()};  // by kFp8LinearNames
  std::vector<std::pair<std::string, const tp::Fp8LinearState*>> out;
  for (size_t i = 0; i < std::size(states); ++i)
    if (states[i]) out.emplace_back(kFp8LinearNames[i], states[i]);
  return out;
}

Tensor GptLayer::layernorm_backward(const tp::LayerNormSaved& saved, const Tensor& gamma, const Tensor& dy,
                                    Tensor& dgamma, Tensor& dbeta) {
  Tensor dg, db;
  Tensor dx = tp::layernorm_backward(*env_.tp, saved, gamma, dy, dg, db);
  accumulate(dgamma, dg);
  accumulate(dbeta, db);
  return dx;
}

// ---- attention sublayer: x + Wo attention(split(LN1(x) Wqkv + bqkv)) + bo

Tensor GptLayer::attention_forward(Saved& s, const Tensor& x) {
  const tp::TpGroup& g = *env_.tp;
  tp::Qkv qkv = tp::qkv_forward(g, w_.attn, x, s.attn);  // q [b, s, H/tp, d], k [b, s, K/tp, d], v [.., dv]
  cp::Forward core = cp::cp_attention_forward(env_.cp, env_.cp_options, qkv.q, qkv.k, qkv.v);
  s.q = qkv.q, s.k = qkv.k, s.v = qkv.v, s.o = core.out, s.lse = core.lse;
  Tensor y = tp::out_proj_forward(g, w_.attn, core.out, s.attn);       // [b, s/tp | s, h]
  if (env_.recompute == Recompute::selective) s.o = s.lse = Tensor{};  // the core runs again in the backward
  if (!s.drop_residual) tp::add_into(y, x);
  return y;
}

Tensor GptLayer::attention_backward_input(Saved& s, const Tensor& dy) {
  const tp::TpGroup& g = *env_.tp;
  Tensor dflat = row_backward_input(g, w_.attn.out, dy, s.d_out_full);  // [b, s, H/tp dv]
  s.d_out = dy;
  if (!s.lse.defined()) {  // selective recomputation: the attention core again, from the saved q, k, v
    cp::Forward core = cp::cp_attention_forward(env_.cp, env_.cp_options, s.q, s.k, s.v);
    s.o = core.out, s.lse = core.lse;
  }
  const Tensor d_o = dflat.reshape(s.o.shape());
  cp::Grads d = cp::cp_attention_backward(env_.cp, env_.cp_options, s.q, s.k, s.v, s.o, s.lse, d_o);
  s.d_qkv = tp::merge_qkv({d.dq, d.dk, d.dv});  // [b, s, ((H + K) d + K dv)/tp], columns (group, {q heads, k, v})
  Tensor dln = column_backward_input(g, w_.attn.qkv, s.d_qkv);
  Tensor dx = layernorm_backward(s.attn.ln, w_.attn.ln_gamma, dln, g_.ln1_gamma, g_.ln1_beta);
  if (!s.drop_residual) tp::add_into(dx, dy);
  s.q = s.k = s.v = s.o = s.lse = Tensor{};
  return dx;
}

// ---- dense MLP sublayer: x + W2 gelu(LN2(x) W1 + b1) + b2

Tensor GptLayer::mlp_forward(Saved& s, const Tensor& x) {
  const tp::TpGroup& g = *env_.tp;
  Tensor ln = tp::layernorm_forward(g, x, w_.ln2_gamma, w_.ln2_beta, s.ln2);  // [b, s/tp | s, h]
  s.a = tp::column_parallel_forward(g, w_.fc1, ln, s.fc1);                    // [b, s, ffn/tp]
  Tensor z = Tensor::empty(s.a.shape(), s.a.dtype(), s.a.device());
  ops::gelu_forward(s.a, z);
  Tensor y = tp::row_parallel_forward(g, w_.fc2, z, s.fc2);  // [b, s/tp | s, h]
  tp::add_into(y, x);
  return y;
}

Tensor GptLayer::mlp_backward_input(Saved& s, const Tensor& dy) {
  const tp::TpGroup& g = *env_.tp;
  Tensor dz = row_backward_input(g, w_.fc2, dy, s.d_fc2_full);  // [b, s, ffn/tp]
  s.d_fc2 = dy;
  ops::gelu_backward(dz, s.a, dz);  // now d a
  s.d_a = dz;
  Tensor dln = column_backward_input(g, w_.fc1, dz);
  Tensor dx = layernorm_backward(s.ln2, w_.ln2_gamma, dln, g_.ln2_gamma, g_.ln2_beta);
  tp::add_into(dx, dy);
  return dx;
}

// ---- MoE sublayer: x + MoE(LN2(x)), this rank's tokens as rows

Tensor GptLayer::moe_forward(int mb, Saved& s, const Tensor& x) {
  Tensor ln = tp::layernorm_forward(*env_.tp, x, w_.ln2_gamma, w_.ln2_beta, s.ln2);
  const int64_t h = x.dim(-1), tokens = x.numel() / h;
  Tensor y = moe_.at(static_cast<size_t>(mb))->forward(ln.reshape({tokens, h})).reshape(x.shape());
  tp::add_into(y, x);
  return y;
}

Tensor GptLayer::moe_backward_input(int mb, Saved& s, const Tensor& dy) {
  const int64_t h = dy.dim(-1), tokens = dy.numel() / h;
  moe::MoeGrads m = moe_.at(static_cast<size_t>(mb))->backward(dy.reshape({tokens, h}));
  accumulate(g_.router, m.router);
  for (size_t e = 0; e < m.w1.size(); ++e) {
    accumulate(g_.expert_w1.at(e), m.w1[e]);
    accumulate(g_.expert_w2.at(e), m.w2[e]);
  }
  Tensor dx = layernorm_backward(s.ln2, w_.ln2_gamma, m.dx.reshape(dy.shape()), g_.ln2_gamma, g_.ln2_beta);
  tp::add_into(dx, dy);
  return dx;
}

}  // namespace sextant::model
