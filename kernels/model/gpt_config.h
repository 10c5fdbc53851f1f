// The GPT that the 6D training step runs (sizes, MoE layer pattern, how the
// step is parallelised beyond the rank grid), and the rules a parallel config
// must meet for it. One table of rules, checked before anything runs.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/dtype.h"
#include "harness/grid.h"
#include "kernels/attention/cp_variants.h"
#include "kernels/attention/layout.h"
#include "kernels/model/recompute.h"
#include "kernels/moe/moe_types.h"
#include "kernels/ops/adam.h"
#include "kernels/ops/attention_impl.h"
#include "kernels/ops/fp8_recipe.h"
#include "kernels/pipeline/schedules.h"

namespace sextant::model {

struct GptConfig {
  // The model (global sizes), as reference/gpt.h defines it.
  int64_t vocab = 512, hidden = 64, heads = 4, head_dim = 16, ffn = 256, layers = 4, seq = 64;
  int64_t kv_heads = 4;  // GQA: key/value heads, each read by heads / kv_heads query heads (= heads: MHA)
  // Head dim of v and the attention output (MLA: DeepSeek-V3's 128 beside a
  // query/key head_dim of 192); = head_dim without MLA.
  int64_t v_head_dim = 16;
  // Packed rows (THD): the lengths of the sequences of every row;
  // attention within each (kernels/model/data.h). Empty: one sequence.
  // Padding is part of the data, the same in every config: each sequence
  // takes a multiple of pad_to rows (its tokens, then padding:
  // TransformerEngine's pad_between_seqs), then tail_padding rows follow the
  // last one; together they fill the seq rows. A padding row is seen by no
  // query, sees no key and predicts nothing (ops::kIgnoreTarget).
  std::vector<int64_t> seq_lens;
  int64_t pad_to = 1, tail_padding = 0;
  // Causal sliding window of every layer's attention: a query sees the keys
  // at most this many positions before it, within its sequence (-1: none).
  int64_t window = -1;
  std::vector<bool> moe;  // [layers]: the layer's feed-forward is MoE (else a dense GELU MLP)
  int experts = 8, topk = 2;
  int64_t moe_ffn = 256;  // width of each expert
  moe::DispatcherKind dispatcher = moe::DispatcherKind::alltoall;
  double eps = 1e-5;  // LayerNorm

  // The step.
  int64_t batch = 16;        // global batch: sequences of seq + 1 tokens per step
  std::string data;          // Megatron indexed dataset prefix ("": random tokens; kernels/model/data.h)
  bool own_dataset = false;  // tokens from a dataset the process writes first (kernels/model/data.h)
  int microbatches = 1;      // per DP replica and step
  pp::ScheduleId schedule = pp::ScheduleId::one_f_one_b;
  cp::Variant cp_comm = cp::Variant::p2p;  // how core attention runs over the CP group
  int a2a_size = 2;                        // a2a+p2p: Ulysses group size (cp = a2a_size x ring size)
  cp::Layout cp_layout = cp::Layout::zigzag;
  ops::AttentionImpl attention_impl = ops::AttentionImpl::own;  // attention blocks on a GPU
  bool regather = true;                // SP: column-parallel inputs saved as shards, all-gathered again for dW
  bool distributed_optimizer = false;  // ZeRO-1: optimizer state sharded over the gradient groups
  // Data-parallel communication (kernels/data_parallel/optimizer.h): gradient
  // buckets of whole layers, reverse order, each closing at bucket_mb MB of
  // f32 gradients (0: one layer per bucket); reduced during the backward
  // (Megatron's --overlap-grad-reduce) and, under ZeRO, parameters gathered
  // during the next forward (--overlap-param-gather).
  double bucket_mb = 0;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  // Activation recomputation (GptLayer): none; selective, the attention
  // core's output and LSE recomputed in the backward from the saved q, k, v
  // (Korthikanti et al. 2022); full, each layer keeps its input alone and
  // runs its forward again in the backward (Megatron's
  // --recompute-granularity full --recompute-method uniform, one layer a unit).
  Recompute recompute = Recompute::none;
  ops::AdamConfig adam{1e-3, 0.9, 0.999, 1e-8, 0.0};
  // Mixed precision: activations and the weights the kernels read are
  // stored in `dtype` (f32 or bf16, accumulation f32 either way); the
  // parameters the optimizer updates, gradients and Adam state stay f32.
  DType dtype = DType::f32;
  // FP8 linears (dense layers only): QKV, output projection, fc1 and fc2
  // under this recipe, every per-tensor amax reduced over TP x DP x CP
  // (kernels/tensor_parallel/fp8_linear.h); none: in `dtype`.
  std::optional<ops::Fp8Recipe> fp8;

  int moe_layer_count() const;
  int64_t tokens_per_step() const { return batch * seq; }  // positions, padding included
  int64_t predictions_per_row() const;                     // positions with a target: seq less padding
  int64_t predictions_per_step() const { return batch * predictions_per_row(); }
  bool operator==(const GptConfig&) const = default;
};

// Megatron's moe_layer_freq: every > 0 makes layer i MoE when i % every == 0;
// a non-empty pattern ("0101", one digit per layer) wins. Throws UsageError
// when the pattern does not fit the layer count.
std::vector<bool> moe_layer_pattern(int64_t layers, int64_t every, const std::string& pattern);

// From a step case's params (keys: vocab, hidden, heads, kv_heads, head_dim, v_head_dim, ffn,
// layers, seq, seq_lens (list), pad_to, tail_padding, moe_every, moe_pattern, experts, topk,
// moe_ffn, dispatcher, batch, data, microbatches, schedule, cp_comm,
// a2a_size, cp_layout, attention_impl, regather, zero, overlap_grad_reduce,
// overlap_param_gather, bucket_mb, lr, adam_eps, fp8_recipe and its
// parameters). Missing keys keep the defaults above.
GptConfig gpt_config_from_json(const nlohmann::json& params);

// Every rule the model imposes on a parallel config; throws UsageError with
// one line naming the parameters and numbers, e.g. "--tp 3 must divide --heads 4".
void validate(const GptConfig& c, const ParallelConfig& p);

// Layers per pipeline stage (stages = pp * vpp), and the stage of a layer.
int64_t layers_per_stage(const GptConfig& c, const ParallelConfig& p);

}  // namespace sextant::model
