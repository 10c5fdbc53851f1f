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
  no_cp_grad_reduce,       // dense gradients summed over dp only, not dp x cp
  experts_over_dp,         // expert gradients summed over the dense DP group instead of EDP
  no_sp_layernorm_reduce,  // under SP, LayerNorm gradients not summed over TP
  loss_token_count,        // each rank averages the loss over its own tokens, not the B * seq of the batch
  stage_drops_residual,    // after a pipeline stage boundary the first layer drops its residual
  early_grad_bucket,       // overlap_grad_reduce: a bucket is reduced before its last weight gradient is written
  unwaited_param_gather,   // overlap_param_gather: the forward reads parameters before their all-gather completes
};

// What a config of the step looks like to its faults.
struct FaultSite {
  GptConfig model;
  ParallelConfig parallel;
};

const FaultTable<Fault, FaultSite>& step_faults();

}  // namespace sextant::model
