#include "kernels/planner/flops.h"

#include "harness/strings.h"

namespace sextant::plan {

ModelSpec model_spec(const model::GptConfig& c) {
  ModelSpec m;
  m.name = "step-gpt";
  m.layers = c.layers, m.hidden = c.hidden, m.heads = c.heads, m.kv_heads = c.kv_heads, m.head_dim = c.head_dim;
  m.v_head_dim = c.v_head_dim;
  m.ffn = c.ffn, m.vocab = c.vocab, m.seq = c.seq;
  m.moe_layers = c.moe_layer_count();
  if (m.moe_layers > 0) m.experts = c.experts, m.topk = c.topk, m.moe_ffn = c.moe_ffn;
  m.causal = true;
  return m;
}

Config plan_config(const model::GptConfig& c, const ParallelConfig& p) {
  Config g;
  g.tp = p.tp, g.cp = p.cp, g.pp = p.pp, g.dp = p.dp, g.ep = p.ep, g.etp = p.expert_tp(), g.vpp = p.vpp;
  g.sp = p.sp;
  g.recompute = c.recompute;
  g.distributed_optimizer = c.distributed_optimizer;
  return g;
}

TrainSpec train_spec(const model::GptConfig& c, const ParallelConfig& p) {
  return {c.batch, c.batch / (static_cast<int64_t>(p.dp) * c.microbatches)};
}

double step_flops(const model::GptConfig& c) { return model_flops_per_step(model_spec(c), c.batch); }

std::string step_flops_formula(const model::GptConfig& c) {
  const int64_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim, v = c.kv_heads * c.v_head_dim,
                o = c.heads * c.v_head_dim, moe = c.moe_layer_count(), dense = c.layers - moe;
  return cat(
      "T*[6h*(ffn*2*L_dense + moe_ffn*topk*2*L_moe) + 6L*(h*(q+kv+v) + o*h) + 6h*V] + 3*(q+o)*L*B*s^2 "
      "(Megatron num_floating_point_operations, causal; T=B*s=",
      c.batch, "*", c.seq, " h=", c.hidden, " ffn=", c.ffn, " L_dense=", dense, " moe_ffn=", c.moe_ffn,
      " topk=", c.topk, " L_moe=", moe, " L=", c.layers, " q=", q, " kv=", kv, " v=", v, " o=", o, " V=", c.vocab, ")");
}

}  // namespace sextant::plan
