// Memory per GPU of a parallel config, by what it holds, on the most loaded
// rank (the first pipeline stage: the embedding, and the most microbatches
// in flight). The planner sizes configs with Megatron's mixed precision; the
// step suite puts the estimate for its own step (sextant_step_layout) beside
// the peak it measures (harness/memory_use.h).
//
// Per parameter held: weights, gradients and optimizer state at the layout's
// bytes, the optimizer's sharded over the data-parallel group (dp x cp, EDP
// for experts) by the distributed optimizer. Per layer and token of a
// microbatch, the activations a layer keeps for its backward (Korthikanti et
// al. 2022 with flash attention: no s^2 term), in elements of width h:
//   replicated over TP (split under SP): LN1 input, QKV input, LN2 input,
//                                        MLP input                      4
//   split over TP:  q, k, v, attention output   (H d + K d + K dv + H dv) / h
//                   MLP before and after its activation  2 w / h  (w: ffn, x1.5 for SwiGLU;
//                   MoE: (topk + shared) moe_ffn)
// plus the layer's dropout masks (bytes per token and unit of h, replicated
// like the first group); full recomputation keeps each layer's input alone,
// and one layer's activations while its backward runs. The last stage keeps
// its logits (f32).
#pragma once

#include "kernels/planner/specs.h"

namespace sextant::plan {

struct MemoryLayout {
  double weight_bytes = 2;              // per parameter: what the forward reads (bf16) ...
  double gradient_bytes = 4;            // ... its f32 main gradient ...
  double sharded_optimizer_bytes = 12;  // ... f32 master + Adam m and v, with the distributed optimizer ...
  double optimizer_bytes = 12;          // ... or without it (every rank whole)
  double bucket_bytes = 0;              // per parameter: gradient buckets of the DP reduction beside the gradients
  double sharded_bucket_bytes = 0;      // ... and the gathered parameters of the distributed optimizer
  double activation_bytes = 2;          // per activation element a layer keeps
  double dropout_mask_bytes = 2;        // per token and unit of h of a layer (two 1-byte masks)
  double logit_bytes = 4;               // per logit of a microbatch
  // Per microbatch and message the rank receives over a pipeline boundary:
  // one buffer of its activation (bytes per element; 0: none kept), as
  // sextant's executor posts every receive of the step up front. The first
  // stage receives 2 vpp - 1 messages a microbatch (gradients into each of
  // its chunks, activations into all but the first).
  double receive_buffer_bytes = 0;
  // The buffers the MoE token dispatcher keeps between steps, per MoE layer
  // and microbatch (dispatch_rows in memory.cc); none in Megatron's count.
  enum class Dispatch { none, sextant_collectives, sextant_peer_memory } dispatch = Dispatch::none;
  // Backward working set: the logits' gradient (bytes per logit) and the
  // gradients of one layer's kept activations, that many layers at once.
  double logit_gradient_bytes = 0, backward_layers = 0;
};
// Megatron-LM's bf16 mixed precision with dropout (the defaults above);
// gradients reduced in bf16 keep their buffer in bf16 too.
MemoryLayout megatron_layout(GradReduce grads = GradReduce::f32);
// The step suite's own step (kernels/model): weights in f32 (plus a copy in
// the compute dtype when that is narrower), f32 gradients and Adam moments
// (the distributed optimizer keeps its f32 master slice too), gradient
// buckets, activations in the compute dtype without dropout, f32 logits,
// every pipeline receive buffer of the step, the MoE dispatch buffers (over
// peer memory or the collectives) and the backward's working set.
MemoryLayout sextant_step_layout(int compute_dtype_bytes, bool peer_memory_dispatch);

// Parameters one GPU of the heaviest stage holds (the first: its pp
// microbatches in flight outweigh the last stage's MTP depths, which
// Megatron gives their own embedding there): its layers split by TP
// (experts by EP and ETP, with the router), the embedding and, at one stage
// or untied, the LM head. Expert parameters are sharded by EDP, the rest by
// dp x cp. moe_layers_held: MoE layers of that rank where the caller knows
// the placement (-1: the MoE layers spread evenly over the stages).
struct HeldParams {
  int64_t layers = 0, dense_layers = 0, moe_layers = 0;  // of the heaviest stage
  double dense = 0, expert = 0;
};
HeldParams held_params(const ModelSpec& m, const Config& c, int64_t moe_layers_held = -1);

struct MemoryBreakdown {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, communication = 0, workspace = 0;
  double total() const { return weights + gradients + optimizer + activations + communication + workspace; }
};
// What the caller knows of the heaviest rank. in_flight: microbatches whose
// activations it holds at once, in units of its whole share of layers (0:
// 1F1B's min(pp, m), interleaving's (1 + (pp - 1) / (pp vpp)) times that;
// Narayanan et al. 2021). moe_layers: as held_params. deferred_weight_grads:
// backwards of a split schedule (zero bubble) whose weight gradient is still
// to run; each keeps its linears' output gradients (workspace).
// expert_load: the most rows one EP rank's experts receive, over the
// balanced count (1: routing balanced); the dispatch buffers that hold
// received rows grow with it.
struct StageLoad {
  double in_flight = 0;
  int64_t moe_layers = -1;
  int deferred_weight_grads = 0;
  double expert_load = 1;
};
MemoryBreakdown estimate_memory(const ModelSpec& m, const TrainSpec& t, const Config& c, const MemoryLayout& layout,
                                const StageLoad& load = {});

}  // namespace sextant::plan
