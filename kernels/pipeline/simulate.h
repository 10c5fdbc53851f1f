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

}  // namespace sextant::pp
