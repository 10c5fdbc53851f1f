// Timing and statistics. Each iteration is timed on every rank; the
// iteration's time is the max over ranks (the slowest rank sets the pace).
// Each rank's own figures are kept beside it, so a slow rank can be named:
// its median and spread, and a straggler score in the manner of
// nvidia-resiliency-ext's straggler detection (a rank's time relative to the
// others').
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "harness/comm.h"
#include "harness/device.h"

namespace sextant {

// Each rank's own figures of a timed region, indexed by rank in the group.
struct RankTimes {
  std::vector<double> median, p10, p90, p99, cv_pct;  // seconds (cv_pct: percent)
  // A rank's median over the median of the ranks' medians: 1 is typical, 2 twice as slow.
  std::vector<double> straggler_score;
  // Of the time ranks spent waiting for the slowest rank of an iteration
  // (the sum over ranks of max - own), the share each rank caused by being
  // that slowest rank. Sums to 1, or is all 0 when no rank waited.
  std::vector<double> wait_share;
  // Every iteration of every rank ([rank][iteration], seconds): kept only
  // with TimingPlan::per_iteration.
  std::vector<std::vector<double>> samples;
  bool empty() const { return median.empty(); }
};

struct TimeStats {
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0, mean = 0, cv_pct = 0;  // seconds
  int iters = 0, warmup = 0;
  RankTimes per_rank;                 // empty when not measured across ranks
  std::vector<double> iteration_max;  // with TimingPlan::per_iteration: each iteration's max over ranks
};

// Summary of raw samples (seconds); percentiles interpolate linearly as numpy does.
TimeStats summarize(std::vector<double> samples, int warmup = 0);
// Linear-interpolated percentile q in [0, 1] of `samples` (need not be sorted).
double percentile_of(std::vector<double> samples, double q);
// The figures of each rank from its samples ([rank][iteration]).
RankTimes rank_times(const std::vector<std::vector<double>>& by_rank, bool keep_samples);
void to_json(nlohmann::json& j, const TimeStats& s);

struct TimingPlan {
  int warmup = 2;
  int iters = 10;
  bool per_iteration = false;  // keep every iteration's time of every rank (--per-iteration)
};

// Runs fn warmup + iters times on every rank of comm. A barrier precedes each
// iteration (outside the timed span); `sync` (e.g. a device synchronize) runs
// inside it so asynchronous work is counted. The per-rank samples are
// gathered once after the loop, so the loop itself adds nothing; the
// result summarises each iteration's max over ranks and keeps each rank's
// own figures in per_rank.
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

// ---- Clocks and scoped timers: the one place sextant reads a clock.

// Monotonic wall clock in seconds.
inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// CPU seconds of this process, every thread: ranks sharing a core each
// report their own work (the clock Google Benchmark's rates use).
double process_cpu_seconds();
// CPU seconds of the calling thread.
double thread_cpu_seconds();

// What a scoped timer measures.
enum class TimerClock {
  wall,         // wall seconds
  wall_synced,  // wall seconds with the device synchronized before each read: the scope's GPU work counts,
                // work queued before it does not
  process_cpu,  // process_cpu_seconds()
  device,       // the compute stream between two CUDA events (its own work only: communication in flight
                // on a side stream is not counted), waited for when the scope ends
};
// The clock of a region's work on `device`: wall on the host, wall_synced on a GPU.
TimerClock wall_clock_on(Device device);
// The clock of compute on `device`: process CPU on the host, the device stream on a GPU.
TimerClock compute_clock_on(Device device);

// Adds the seconds of its scope to *total (nullptr: measures nothing), or
// appends them to a log. Never throws from its destructor: a failed GPU is
// reported by the next CUDA call.
class ScopedTimer {
 public:
  ScopedTimer(double* total, TimerClock clock);
  ScopedTimer(std::vector<double>& log, TimerClock clock);
  ~ScopedTimer();
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  void begin();
  double read() const;
  double* total_ = nullptr;
  std::vector<double>* log_ = nullptr;
  TimerClock clock_;
  double start_ = 0;
  std::unique_ptr<CudaRegionTimer> gpu_;
};

}  // namespace sextant
