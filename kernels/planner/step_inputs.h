// What the calibrated step model (step_cost.h) takes besides the model,
// the parallel config and a calibration: how the step runs and what the
// contention probe measured (StepShape), and what a config asks of a
// calibration (CostQueries).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>

#include "kernels/attention/cp_variants.h"
#include "kernels/pipeline/schedules.h"

namespace sextant::plan {

// How the step runs beyond the parallel sizes (the step suite's options).
struct StepShape {
  pp::ScheduleId schedule = pp::ScheduleId::one_f_one_b;
  cp::Variant cp_comm = cp::Variant::p2p;
  int a2a_size = 2;
  bool regather = true;    // SP: column inputs all-gathered again for dW
  bool zero = false;       // ZeRO-1: reduce-scatter + all-gather instead of all-reduce
  int ranks_per_node = 0;  // 0: every rank on one node
  int cores_per_node = 0;  // 0: as calibrated
  int threads_per_rank = 1;
  double compute_slowdown = 0;         // measured: compute time / uncontended compute time (0: from the cores)
  double sync_s = 0;                   // measured: extra seconds per blocking synchronisation ...
  int sync_ranks = 2;                  // ... of this many ranks ...
  double sync_chunk_s = 0;             // ... after this much compute (uncontended seconds; 0: any)
  double sync_short_s = 0;             // measured: the same wait after only ...
  double sync_short_chunk_s = 0;       // ... this much compute (0: none measured, the wait falls to 0 with no compute)
  std::map<int, double> sync_group_s;  // measured: sync_s on groups of n ranks (else H(n-1) / H(sync_ranks-1) of it)
  double bytes_per_element = 4;        // activations and gradients (f32)
};

// What a config asks of a calibration, so that one can measure exactly
// that: gemm shapes {m, n, k, ta, tb}, attention blocks {sequences, rows,
// heads, head_dim, causal}, elementwise sizes (elements), tokens a MoE
// layer routes on a rank, group sizes.
struct CostQueries {
  std::set<std::array<int64_t, 5>> gemms, attention;
  std::set<int64_t> elementwise, moe_tokens;
  std::set<int> group_sizes;
};
}  // namespace sextant::plan
