// Timing and statistics. Each iteration is timed on every rank; the
// iteration's time is the max over ranks (the slowest rank sets the pace).
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "harness/comm.h"

namespace sextant {

struct TimeStats {
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0, mean = 0, cv_pct = 0;  // seconds
  int iters = 0, warmup = 0;
};

// Summary of raw samples (seconds); percentiles interpolate linearly as numpy does.
TimeStats summarize(std::vector<double> samples, int warmup = 0);
void to_json(nlohmann::json& j, const TimeStats& s);

struct TimingPlan {
  int warmup = 2;
  int iters = 10;
};

// Runs fn warmup + iters times on every rank of comm. A barrier precedes each
// iteration (outside the timed span); `sync` (e.g. a device synchronize) runs
// inside it so asynchronous work is counted. The per-rank samples are reduced
// with one max all-reduce after the loop, so the loop itself adds nothing.
TimeStats time_iterations(Communicator& comm, const TimingPlan& plan, const std::function<void()>& fn,
                          const std::function<void()>& sync = {});

// How one iteration is measured: start() just before fn, stop() just after
// it, returning the seconds the iteration took once its work is complete.
// GPU runs use CUDA events on the compute stream (CudaRegionTimer).
struct IterationClock {
  std::function<void()> start;
  std::function<double()> stop;
};
// The wall clock, with `sync` (may be empty) run before reading it.
IterationClock wall_clock(std::function<void()> sync = {});
// As above, measured by `clock`.
TimeStats time_iterations(Communicator& comm, const TimingPlan& plan, const std::function<void()>& fn,
                          const IterationClock& clock);

// Monotonic wall clock in seconds.
inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace sextant
