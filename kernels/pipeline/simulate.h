// Schedule simulator: the timeline a schedule would have with given action
// costs and point-to-point latency, under the executor's semantics (each
// rank runs its actions in order; an action starts when the rank is free and
// everything it depends on has finished, plus the latency when the input
// comes from another rank; sends never block).
#pragma once

#include <string>
#include <vector>

#include "kernels/pipeline/schedule.h"
#include "kernels/pipeline/timeline.h"

namespace sextant::pp {

// Cost of each action type per stage (any time unit; seconds when measured).
struct CostModel {
  std::vector<double> f, b, i, w;  // [stages]
  double latency = 0;              // per message between different ranks

  // Every stage alike; a full backward costs i + w.
  static CostModel uniform(int stages, double f, double i, double w, double latency = 0);
  double cost(const Action& action) const;
};

// Mean measured duration of each action type per stage. A type the
// timeline never ran on a stage is derived: b = i + w, or i = w = b / 2.
CostModel measured_costs(const Schedule& schedule, const Timeline& measured, double latency = 0);

struct Simulation {
  Timeline timeline;
  TimelineStats stats;
  std::vector<double> peak_activations;  // per rank, microbatches
};

// Validates the schedule first (throws ScheduleError).
Simulation simulate(const Schedule& schedule, const CostModel& costs);

// Replays a measured timeline: every action costs exactly what it measured
// (not the mean of its kind), so the replay's idle is what the schedule's
// dependencies force given those durations; measured idle beyond it is the
// executor's overhead (messages, waits, noise). Same ranks and order as
// `schedule`.
Simulation replay(const Schedule& schedule, const Timeline& measured, double latency = 0);

// Textbook bubble fraction of the step (idle / makespan) with equal costs,
// F : I : W = 1 : 1 : 1 per stage (B = I + W), no latency; the simulator
// reproduces each exactly (simulate_test.cc):
//   gpipe, 1f1b   (p-1) / (m + p - 1)                 Narayanan et al. 2021
//   interleaved   (p-1) / (v m + p - 1)               bubble time / v
//   zb-h1         (p-1) / (3m + p - 1), m >= p        Qi et al. 2024: bubble
//                 (p-1)(F + I - W) against 1F1B's (p-1)(F + I + W)
//   zb-v          (p-1) / (6m + p - 1), m >= 2p - 1   only the fill of the V,
//                 p-1 chunk forwards (a chunk costs half a stage), is idle
//   dualpipe-v    the same, m >= 2p, with each F&B pair run forward first
//                 (DualPipe's overlap of the pair is not modelled)
// NaN where the form does not apply (fewer microbatches than stated).
double closed_form_bubble(const std::string& schedule, int p, int m, int v);

}  // namespace sextant::pp
