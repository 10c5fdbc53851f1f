#include "kernels/planner/memory.h"

#include <algorithm>

namespace sextant::plan {

MemoryLayout megatron_layout(GradReduce grads) {
  MemoryLayout l;
  if (grads == GradReduce::bf16) l.gradient_bytes = 2;
  return l;
}

MemoryLayout sextant_step_layout(int compute_dtype_bytes, bool peer_memory_dispatch) {
  MemoryLayout l;
  l.weight_bytes = 4.0 + (compute_dtype_bytes < 4 ? compute_dtype_bytes : 0);
  l.gradient_bytes = 4;
  l.optimizer_bytes = 8;           // m and v: the f32 weights are the master copy
  l.sharded_optimizer_bytes = 12;  // the master slice, m and v
  l.bucket_bytes = 4;              // every gradient again, in its bucket
  l.sharded_bucket_bytes = 4;      // the gathered parameters
  l.activation_bytes = compute_dtype_bytes;
  l.dropout_mask_bytes = 0;
  l.logit_bytes = 4;
  l.receive_buffer_bytes = compute_dtype_bytes;
  l.dispatch =
      peer_memory_dispatch ? MemoryLayout::Dispatch::sextant_peer_memory : MemoryLayout::Dispatch::sextant_collectives;
  l.logit_gradient_bytes = 4;
  l.backward_layers = 1;
  return l;
}

namespace {

// Rows of width h sextant's dispatchers (kernels/moe) keep per MoE layer and
// microbatch, for R rows this rank routes, T tokens it holds and f the
// expert load (StageLoad: the rows an EP rank receives are f R at most).
// Each pass (forward, backward) keeps its output [T, h] and, per routed row:
//   peer memory (EP > 1, no ETP): four windows (input and output, each
//     pass) shared with the peers, each a quarter larger than the most
//     rows an EP rank receives, so 4 x 1.25 f R for both passes
//   collectives, no ETP: the permuted rows R, the expert inputs f R and
//     the rows back (EP > 1) or unsorted (EP 1) R, a pass
//   collectives with ETP Q > 1: the permuted rows R, the EP exchange f R
//     and the rows back R (at EP > 1), and four buffers of the ETP group's
//     Q f R rows (the gather, the expert inputs, the unsort, the
//     reduce-scatter parts)
double dispatch_rows(MemoryLayout::Dispatch d, const Config& g, double routed, double tokens, double load) {
  const double received = std::max(1.0, load) * routed;
  switch (d) {
    case MemoryLayout::Dispatch::none: return 0;
    case MemoryLayout::Dispatch::sextant_peer_memory:
      if (g.ep > 1 && g.etp == 1) return 4 * 1.25 * received + 2 * tokens;
      [[fallthrough]];  // the dispatcher falls back to the collectives
    case MemoryLayout::Dispatch::sextant_collectives:
      if (g.etp == 1) return 2 * (2 * routed + received + tokens);
      return 2 * (routed + (g.ep > 1 ? routed + received : 0) + 4.0 * g.etp * received + tokens);
  }
  return 0;
}

}  // namespace

HeldParams held_params(const ModelSpec& m, const Config& g, int64_t moe_layers_held) {
  HeldParams p;
  // One stage holds every layer and the MTP depths (sharing the embedding);
  // over pp > 1 the first stage's ceil(L / pp) layers.
  const bool one_stage = g.pp == 1;
  p.layers = one_stage ? m.layers + m.mtp_layers : (m.layers + g.pp - 1) / g.pp;
  const int64_t moe_share = one_stage ? m.trained_moe_layers() : (m.moe_layers + g.pp - 1) / g.pp;
  p.moe_layers = std::min<int64_t>(p.layers, moe_layers_held >= 0 ? moe_layers_held : moe_share);
  p.dense_layers = p.layers - p.moe_layers;
  p.dense = p.layers * m.attention_params() / g.tp + p.dense_layers * m.mlp_params(m.ffn) / g.tp +
            (one_stage && !m.tied_embeddings ? 2.0 : 1.0) * m.vocab * m.hidden / g.tp +
            p.moe_layers * m.shared_experts * m.mlp_params(m.moe_ffn) / g.tp +
            (one_stage ? 2.0 * m.mtp_layers * m.hidden * m.hidden / g.tp : 0.0);
  p.expert =
      p.moe_layers * (static_cast<double>(m.experts) / g.ep * m.mlp_params(m.moe_ffn) / g.etp + m.hidden * m.experts);
  return p;
}

MemoryBreakdown estimate_memory(const ModelSpec& m, const TrainSpec& t, const Config& g, const MemoryLayout& l,
                                const StageLoad& load) {
  MemoryBreakdown b;
  const HeldParams p = held_params(m, g, load.moe_layers);
  const double params = p.dense + p.expert;
  const int dp_cp = g.dp * g.cp, edp = g.tp * g.cp * g.dp / (g.etp * g.ep);
  b.weights = l.weight_bytes * params;
  b.gradients = l.gradient_bytes * params;
  b.optimizer = g.distributed_optimizer ? l.sharded_optimizer_bytes * (p.dense / dp_cp + p.expert / edp)
                                        : l.optimizer_bytes * params;
  b.communication = l.bucket_bytes * params;
  if (g.distributed_optimizer) b.communication += l.sharded_bucket_bytes * params;

  const int64_t microbatches = t.global_batch / (static_cast<int64_t>(g.dp) * t.micro_batch);
  double in_flight = load.in_flight;
  if (in_flight <= 0)
    in_flight = std::min<double>(g.pp, microbatches) * (g.vpp > 1 ? 1.0 + (g.pp - 1.0) / (g.pp * g.vpp) : 1.0);
  // Per layer and microbatch, bytes per token-unit of h (sbh).
  const double tokens = static_cast<double>(m.seq) / g.cp * t.micro_batch, sbh = tokens * m.hidden;
  const double h = static_cast<double>(m.hidden), a = l.activation_bytes;
  const double replicated = (4 * a + l.dropout_mask_bytes) / (g.sp ? g.tp : 1);
  const double attention =
      a * static_cast<double>(m.heads * m.dhead() + m.kv() * m.dhead() + m.kv() * m.dv() + m.heads * m.dv()) / h / g.tp;
  auto layer_bytes = [&](double mlp_width) { return sbh * (replicated + attention + a * 2 * mlp_width / h / g.tp); };
  const double widen = m.swiglu ? 1.5 : 1.0;
  const double dense_layer = layer_bytes(m.ffn * widen),
               moe_layer = layer_bytes((m.topk + m.shared_experts) * m.moe_ffn * widen);
  const double all_layers = p.dense_layers * dense_layer + p.moe_layers * moe_layer;
  const double per_microbatch = g.recompute == Recompute::full ? p.layers * a * sbh / (g.sp ? g.tp : 1) : all_layers;
  const double recompute_working = g.recompute == Recompute::full ? all_layers / p.layers : 0;
  const double logits = tokens * m.vocab / g.tp;
  b.activations = per_microbatch * in_flight + recompute_working + logits * l.logit_bytes;
  const double heaviest_layer = p.moe_layers > 0 ? std::max(moe_layer, dense_layer) : dense_layer;
  // The backward's working set, its two largest parts counted together: the
  // measured peak comes sometimes as the backward starts (the logits'
  // gradient), sometimes inside a layer's backward, so the model of this
  // kind is the roughest (its error by config: docs/DESIGN.md).
  b.workspace = logits * l.logit_gradient_bytes + l.backward_layers * heaviest_layer;
  // A deferred W keeps, per layer and token, the gradients of its linears'
  // outputs: QKV and the attention projection's (gathered, and local under
  // SP), and in a dense layer fc1's and fc2's (an MoE layer's experts take
  // their weight gradients in the input backward).
  const double local = g.sp ? h / g.tp : 0;
  const double attention_dy =
      static_cast<double>(m.heads * m.dhead() + m.kv() * m.dhead() + m.kv() * m.dv()) / g.tp + h + local;
  const double mlp_dy = m.ffn * (m.swiglu ? 2.0 : 1.0) / g.tp + h + local;
  b.workspace += load.deferred_weight_grads * tokens * a * (p.layers * attention_dy + p.dense_layers * mlp_dy);

  // Kept buffers: pipeline receives and the MoE dispatch rows.
  if (g.pp > 1) b.communication += l.receive_buffer_bytes * (2.0 * g.vpp - 1) * microbatches * sbh / (g.sp ? g.tp : 1);
  const double routed = tokens * m.topk / (g.sp ? g.tp : 1), own = tokens / (g.sp ? g.tp : 1);
  b.communication += p.moe_layers * microbatches * a * h * dispatch_rows(l.dispatch, g, routed, own, load.expert_load);
  return b;
}

}  // namespace sextant::plan
