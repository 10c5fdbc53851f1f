// Model FLOPs of a training step, Megatron's num_floating_point_operations
// (Megatron-LM, megatron/training/training.py),
// with T = B * s tokens, q = heads * head_dim, kv = kv_heads * head_dim, and
// for the value head dim dv: v = kv_heads * dv, o = heads * dv (MLA: dv !=
// head_dim; else v = kv, o = q); F = 2 (GELU MLP, two matrices):
//
//   FLOPs = T [ 6 h (ffn F L_dense + moe_ffn topk F L_moe)     MLPs (MoE: the top-k experts)
//             + 6 L (h (q + kv + v) + o h)                      QKV and output projections
//             + 6 h V ]                                         LM head
//         + 3 (q + o) L B s^2                                   causal attention: QK^T and PV (x2 unmasked)
//
// MTP depths (ModelSpec::mtp_layers) count as layers of the last layer's
// kind, each with 6 T (2 h^2 + h V) for its projection and logits.
//
// Forward + backward = 3 x forward, a product with n weights costs 2n per
// token forward. Router, LayerNorms, biases and the embedding lookup are not
// counted (as in Megatron). The planner (planner.h) uses the same formula.
#pragma once

#include <string>

#include "kernels/model/gpt_config.h"
#include "kernels/planner/planner.h"

namespace sextant::plan {

ModelSpec model_spec(const model::GptConfig& c);
// The planner's view of a step's config: the parallel sizes, recomputation
// and optimizer; the global batch and the microbatch size.
Config plan_config(const model::GptConfig& c, const ParallelConfig& p);
TrainSpec train_spec(const model::GptConfig& c, const ParallelConfig& p);
double step_flops(const model::GptConfig& c);
// The formula with this model's numbers, for the JSON `flops_formula`.
std::string step_flops_formula(const model::GptConfig& c);

}  // namespace sextant::plan
