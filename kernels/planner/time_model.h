// The planner's step time on a GPU cluster: what one rank of the heaviest
// pipeline stage does per microbatch, each part costed by what limits it,
// then the pipeline and the data-parallel reduction around it.
//
//   gemms        each linear of the layer at its own shape (M tokens, N, K),
//                forward, input gradient and weight gradient:
//                2MNK / (peak x gemm_efficiency x waves(M, N)) + gemm_latency,
//                waves = the share of the last wave of 128 x 256 output
//                tiles over the SMs that is busy (cuBLAS's Hopper tiles)
//   attention    the attention core's FLOPs at cuDNN's fused attention
//                rate for the kernel's key length (seq / cp), measured on
//                one H200 at 4k-16k keys (bf16, d 128; results/runs), e.g.
//                causal forward 450 of 989 TFLOP/s at 4k, 621 at 16k: that
//                fraction of each device's peak
//   memory-bound norms, residual adds, the MLP's activation (squared ReLU
//                in two unfused passes), the MoE permutes, cross-entropy
//                (fused, or Megatron's unfused f32 passes: TrainSpec), FP8
//                casts and Adam: their bytes at the device's memory bandwidth
//   overhead     layer_overhead per layer and microbatch (fitted)
//   tp, cp, ep   the collectives and ring messages of each layer (bus
//                bandwidth factors of nccl-tests), each exposed as far as
//                its Overlap fraction does not hide it behind the compute
//                that can cover it: TP behind the layer's gemms, CP behind
//                the attention core, EP behind the layer's compute. Without
//                TP overlap, the TP collectives Megatron runs asynchronously
//                in the backward still hide behind their linears' gemms;
//                full recompute runs each forward's communication again
//   dp           gradient reduce-scatter and parameter all-gather, hidden
//                (Overlap::dp) behind the last microbatch's backward and the
//                first one's forward; interleaved, each model chunk's
//                reduce starts after its last backward and queues behind
//                the cooldown's remaining chunks, the last chunk's exposed
//   bubble       (pp - 1) / vpp microbatch-stage times (Narayanan et al. 2021)
//   pp           one activation and one gradient per model chunk on the
//                schedule's critical path, hidden (Overlap::pp) behind the
//                next chunk's forward under the interleaved schedule
#pragma once

#include "kernels/planner/specs.h"

namespace sextant::plan {

// Seconds per step on the heaviest rank, by what they are spent on.
struct StepTime {
  double gemm = 0, attention = 0, memory_bound = 0, overhead = 0, optimizer = 0;  // compute
  double tp = 0, cp = 0, ep = 0, dp = 0, pp = 0;                                  // exposed communication
  double bubble = 0;
  double compute() const { return gemm + attention + memory_bound + overhead + optimizer; }
  double step() const { return compute() + tp + cp + ep + dp + pp + bubble; }
};

// Seconds of one gemm of [M x K] by [K x N] at `peak_tflops` (bf16 or FP8).
double gemm_seconds(const ClusterSpec& c, double peak_tflops, double m, double n, double k);

// The caller has validated the config (planner.h validate).
StepTime step_time(const ModelSpec& m, const ClusterSpec& c, const TrainSpec& t, const Config& g);

}  // namespace sextant::plan
