// The planted faults of the 6D training step (docs/CONFORMANCE.md), each a
// bug real 6D code has had, as one table (harness/fault_table.h). The
// trainer hands the stages and the optimizer their part.
#pragma once

#include "harness/fault_table.h"
#include "harness/grid.h"
#include "kernels/model/gpt_config.h"

namespace sextant::model {

enum class Fault {
  none,
  no_cp_grad_reduce,             // dense gradients summed over dp only, not dp x cp
  experts_over_dp,               // expert gradients summed over the dense DP group instead of EDP
  no_sp_layernorm_reduce,        // under SP, LayerNorm gradients not summed over TP
  loss_token_count,              // each rank averages the loss over its own tokens, not the B * seq of the batch
  padding_in_loss,               // the loss averaged over every position, padding rows included
  stage_drops_residual,          // after a pipeline stage boundary the first layer drops its residual
  early_grad_bucket,             // overlap_grad_reduce: a bucket is reduced before its last weight gradient is written
  unwaited_param_gather,         // overlap_param_gather: the forward reads parameters before their all-gather completes
  fp8_amax_not_reduced_over_dp,  // FP8 linears: amaxes reduced over TP only, not over the DP x CP token split
  recompute_wrong_input,         // full recomputation reruns each layer on its output, not the input it checkpointed
};

// What a config of the step looks like to its faults.
struct FaultSite {
  GptConfig model;
  ParallelConfig parallel;
};

namespace rules {

// Only where the dense DP group is not the EDP group.
inline bool experts_leave_dp(const FaultSite& s) {
  if (s.model.moe_layer_count() == 0) return false;
  const ParallelConfig& p = s.parallel;
  const RankGrid grid(p, p.world());
  for (int r = 0; r < p.world(); ++r)
    if (grid.group(Dim::dp, r) != grid.group(Dim::edp, r)) return true;
  return false;
}

}  // namespace rules

inline const FaultTable<Fault, FaultSite>& step_faults() {
  static const FaultTable<Fault, FaultSite> table(
      "step",
      {
          {Fault::no_cp_grad_reduce, "no_cp_grad_reduce", "dense gradients summed over dp only, not dp x cp",
           "CP of 2+", [](const FaultSite& s) { return s.parallel.cp > 1; }},
          {Fault::experts_over_dp, "experts_over_dp", "expert gradients summed over the dense DP group, not EDP",
           "MoE layers where the dense DP group differs from EDP", rules::experts_leave_dp},
          {Fault::no_sp_layernorm_reduce, "no_sp_layernorm_reduce", "under SP, LayerNorm gradients not summed over TP",
           "TP of 2+ with SP", [](const FaultSite& s) { return s.parallel.sp && s.parallel.tp > 1; }},
          {Fault::loss_token_count, "loss_token_count",
           "each rank averages the loss over its own tokens, not the B * seq of the batch", "dp x cp of 2+",
           [](const FaultSite& s) { return s.parallel.dp * s.parallel.cp > 1; }},
          {Fault::padding_in_loss, "padding_in_loss",
           "the loss averaged over every position of the batch, padding rows included, not its predictions",
           "packed rows with padding", [](const FaultSite& s) { return s.model.predictions_per_row() < s.model.seq; }},
          {Fault::stage_drops_residual, "stage_drops_residual",
           "after a pipeline stage boundary the first layer drops its residual", "2+ pipeline stages",
           [](const FaultSite& s) { return s.parallel.pp * s.parallel.vpp > 1; }},
          {Fault::early_grad_bucket, "early_grad_bucket",
           "a gradient bucket is reduced before its last weight gradient is written", "overlap_grad_reduce",
           [](const FaultSite& s) { return s.model.overlap_grad_reduce; }},
          {Fault::unwaited_param_gather, "unwaited_param_gather",
           "the forward reads parameters before their ZeRO all-gather completes (shows from the second step)",
           "overlap_param_gather", [](const FaultSite& s) { return s.model.overlap_param_gather; }},
          {Fault::fp8_amax_not_reduced_over_dp, "fp8_amax_not_reduced_over_dp",
           "FP8 linears: each amax reduced over TP only, not over the DP x CP ranks that split the tokens, so "
           "ranks cast their shares with scales of their own",
           "per-tensor FP8 recipes, dp x cp of 2+",
           [](const FaultSite& s) {
             return s.model.fp8 && s.model.fp8->per_tensor() && s.parallel.dp * s.parallel.cp > 1;
           }},
          {Fault::recompute_wrong_input, "recompute_wrong_input",
           "full activation recomputation reruns each layer's forward on the layer's output instead of the input "
           "it checkpointed (the checkpoint saved the wrong tensor)",
           "--set recompute=full", [](const FaultSite& s) { return s.model.recompute == Recompute::full; }},
      });
  return table;
}

}  // namespace sextant::model
