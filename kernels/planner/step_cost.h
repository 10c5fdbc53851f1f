// The calibrated planner: the step time of a parallel config built from a
// machine's measured component rates (calibration.h) instead of a roofline.
//
// Per pipeline stage and microbatch it lists what one rank does, as the 6D
// step of kernels/model runs it (gpt_layer.h, gpt_stages.h, optimizer.h):
//   gemms      forward, input gradient (I) and weight gradient (W) of QKV,
//              the output projection, the MLP (or router and local experts),
//              the LM head: each timed at its own shape by the gemm model
//   attention  the attention block's FLOPs, forward and backward, in cp calls
//   elementwise LayerNorms, residual and bias adds, GELU, QKV split/merge,
//              MoE permutes, cross-entropy, gradient accumulation, SP's
//              layout copies, the ring's LSE merges: bytes
//   moe routing the MoE layer's routing bookkeeping, permutes and combine,
//              per token (or as elementwise bytes where not calibrated)
//   tp, cp, ep the collectives and ring messages of each layer, each timed
//              by the link model of its operation, group size and kind
// then runs the pipeline simulator (kernels/pipeline/simulate.h) on the
// schedule with those per-stage costs and the p2p latency, and adds the
// data-parallel gradient reduction (one bucket per layer, packed and
// unpacked) and Adam.
//
// Ranks that share cores run slower: the compute is scaled by the slowdown
// measured where the step runs (StepShape::compute_slowdown, the sweep's
// contention probe), else by max(1, ranks per node x threads / cores). A
// pipeline's ranks idle in its bubble give their cores up, so there the
// contention (compute slowdown and waits alike) is scaled by the schedule's
// busy fraction, down to none. And
// they meet later: each blocking collective or ring step costs sync_s more
// than its link model says, the probe's measure of how long ranks that were
// computing for sync_chunk_s wait for each other at a collective of
// sync_ranks (0 on dedicated devices); a group of n waits as long as the
// probe measured on groups of n (sync_group_s), else for its last of n - 1
// partners, which for independent exponential delays takes
// H(n-1) / H(sync_ranks-1) as long (H the harmonic number). Where ranks
// share cores the delays are not independent: a partner waits behind the
// other ranks on its core whatever the group's size. Collectives
// closer together than sync_chunk_s of compute wait less: linearly down to
// the probe's sync_short_s after sync_short_chunk_s of compute (to 0 at no
// compute where that is not measured).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "kernels/planner/calibration.h"
#include "kernels/planner/planner.h"
#include "kernels/planner/step_inputs.h"

namespace sextant::plan {

struct CalibratedStep {
  // Seconds per step on the most loaded rank.
  double gemm = 0, attention = 0, elementwise = 0, optimizer = 0;  // compute
  double tp = 0, cp = 0, ep = 0, dp = 0, pp = 0;                   // communication
  double sync = 0;  // waiting for partners at the collectives of the forward and backward (shared cores)
  double bubble = 0, step = 0;
  double core_share = 1;  // the compute scale for ranks sharing cores
};
void to_json(nlohmann::json& j, const CalibratedStep& s);

// Adds to `out` what this config asks of a calibration.
void collect_queries(const ModelSpec& m, const Config& c, const TrainSpec& t, const StepShape& shape, CostQueries& out);

// Throws UsageError for configs validate() rejects (planner.h).
CalibratedStep calibrated_step(const ModelSpec& m, const Config& c, const TrainSpec& t, const StepShape& shape,
                               const Calibration& cal);

// The planner's estimate with the calibrated step time (memory as
// estimate() computes it; model FLOPs and MFU against cluster.peak_tflops).
Estimate estimate_calibrated(const ModelSpec& m, const ClusterSpec& cluster, const TrainSpec& t, const Config& c,
                             const StepShape& shape, const Calibration& cal);

}  // namespace sextant::plan
