// Timelines: when each action ran on each rank, simulated or measured, and
// the numbers a pipeline step is judged by.
//   makespan      end of the last action on any rank (time 0 = step start)
//   busy, idle    per rank: summed action time, makespan - busy
//   bubble        per rank idle / makespan; mean and max over ranks
//   peak activations  per rank, in microbatches: the activations of
//                 (stage, microbatch) are held from its F until its backward
//                 finishes (B, or W after I); a chunk of a rank holding v
//                 stages counts 1/v of a microbatch
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/pipeline/schedule.h"

namespace sextant::pp {

struct TimedAction {
  Action action;
  double start = 0, end = 0;  // seconds (or cost units) since the step start
};

struct Timeline {
  std::vector<std::vector<TimedAction>> ranks;  // per rank, in execution order
};

struct TimelineStats {
  double makespan = 0;
  std::vector<double> busy, idle, bubble;  // per rank
  double bubble_mean = 0, bubble_max = 0;
};
TimelineStats summarize(const Timeline& timeline);

// Per rank, from the order alone (no times needed).
std::vector<double> peak_activations(const Schedule& schedule);

// METRICS.md "timeline": per rank a list of [stage, "F", microbatch, start_s, end_s].
nlohmann::json timeline_json(const Timeline& timeline);
// Chrome trace event format (opens in Perfetto / chrome://tracing): one
// complete event ("ph": "X") per action, rank = thread, microseconds.
nlohmann::json chrome_trace(const Timeline& timeline, const std::string& process_name);

}  // namespace sextant::pp
