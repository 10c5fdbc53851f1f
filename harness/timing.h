// Timing and statistics. Each iteration is timed on every rank; the
// iteration's time is the max over ranks (the slowest rank sets the pace).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "harness/comm.h"
#include "harness/device.h"

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
