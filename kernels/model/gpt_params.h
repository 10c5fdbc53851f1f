// The GPT's parameters as one table: every global tensor (the layouts of
// reference/gpt.h), its deterministic initial values, how the rank grid
// shards it, and where its gradient is summed. The model, the gradient
// reduction, the optimizer and the suite's gathering all read this table, so
// a parameter is described once.
//
//   name                    global shape     sharded over            gradient summed over
//   embedding               [V, h]           TP rows (vocab)         dp x cp
//   layers.i.ln1_gamma/beta [h]              -                       (tp under SP) + dp x cp
//   layers.i.wqkv           [h, (H+2K) d]    TP columns (KV groups)  dp x cp
//   layers.i.bqkv           [(H+2K) d]       TP                      dp x cp
//   layers.i.wo             [H d, h]         TP rows (heads)         dp x cp
//   layers.i.bo             [h]              -                       (tp under SP) + dp x cp
//   layers.i.ln2_gamma/beta [h]              -                       (tp under SP) + dp x cp
//   dense: w1 [h, ffn] (TP cols), b1 [ffn] (TP), w2 [ffn, h] (TP rows), b2 [h] (tp under SP)
//   MoE:   router [h, E] (tp under SP), expert_w1 [E, h, f] (EP experts, ETP cols),
//          expert_w2 [E, f, h] (EP experts, ETP rows): summed over EDP
//   lnf_gamma/beta          [h]              -                       (tp under SP) + dp x cp
//   head                    [h, V]           TP columns (vocab)      dp x cp
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/grid.h"
#include "harness/tensor.h"
#include "kernels/data_parallel/trained_param.h"
#include "kernels/model/gpt_config.h"

namespace sextant::model {

using dp::GradGroup;  // dense: dp x cp; expert: EDP

struct ParamSpec {
  std::string name;
  Shape shape;                 // global
  int layer = -1;              // -1: embedding (first stage) or final LayerNorm / head (last stage)
  double mean = 0, scale = 0;  // initial value: mean + uniform[-scale, scale), rounded to the dtype
  int tp_dim = -1;             // dimension split over TP (-1: replicated over TP)
  bool expert = false;         // dim 0 = experts split over EP (one block per local expert), ETP splits etp_dim
  int etp_dim = -1;
  bool sp_partial = false;  // replicated over TP; under SP its gradient is a partial sum over TP
  bool is_layernorm = false;
  GradGroup group = GradGroup::dense;
};

// Every parameter of the model, in reference/gpt.h's order (GptParams::tensors()).
std::vector<ParamSpec> param_specs(const GptConfig& c);

// The units of the step: parameters used and differentiated together, in
// forward order: 0 the embedding, 1 + i layer i, layers + 1 the final
// LayerNorm and head. The backward finishes them in reverse order; gradient
// buckets hold whole units.
int unit_of(const ParamSpec& p, int64_t layers);
inline int unit_count(int64_t layers) { return static_cast<int>(layers) + 2; }

// The whole tensor (the reference's initial value) and a block of it (a
// rank's shard): identical values element for element.
Tensor init_global(const ParamSpec& p, uint64_t seed, DType dtype);
Tensor init_block(const ParamSpec& p, uint64_t seed, const Shape& offset, const Shape& local, DType dtype);

// One block of a parameter held by this rank: an expert parameter gives one
// block per local expert ([1, h, f/etp] etc.), every other parameter one.
struct ParamBlock {
  int spec = 0;  // index into param_specs()
  Shape offset, local;
  int local_expert = -1;  // expert blocks: which local expert
};
// The blocks of spec held by a rank at `coords` (empty when its stage is elsewhere is the caller's business).
std::vector<ParamBlock> blocks_of(const std::vector<ParamSpec>& specs, int spec, const ParallelConfig& p,
                                  const RankCoords& coords);

}  // namespace sextant::model
