#include "harness/timing.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

namespace sextant {

namespace {
double read_clock(clockid_t id) {
  timespec t{};
  clock_gettime(id, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
}  // namespace

double process_cpu_seconds() { return read_clock(CLOCK_PROCESS_CPUTIME_ID); }
double thread_cpu_seconds() { return read_clock(CLOCK_THREAD_CPUTIME_ID); }

TimerClock wall_clock_on(Device device) { return device == Device::host ? TimerClock::wall : TimerClock::wall_synced; }
TimerClock compute_clock_on(Device device) {
  return device == Device::host ? TimerClock::process_cpu : TimerClock::device;
}

ScopedTimer::ScopedTimer(double* total, TimerClock clock) : total_(total), clock_(clock) {
  if (total_) begin();
}

ScopedTimer::ScopedTimer(std::vector<double>& log, TimerClock clock) : log_(&log), clock_(clock) { begin(); }

void ScopedTimer::begin() {
  if (clock_ != TimerClock::device) {
    start_ = read();
    return;
  }
  gpu_ = std::make_unique<CudaRegionTimer>(/*join_side_streams=*/false);
  gpu_->start();
}

double ScopedTimer::read() const {
  switch (clock_) {
    case TimerClock::wall_synced: cuda_synchronize(); return now_seconds();
    case TimerClock::process_cpu: return process_cpu_seconds();
    default: return now_seconds();
  }
}

ScopedTimer::~ScopedTimer() {
  if (!total_ && !log_) return;
  try {
    const double seconds = gpu_ ? gpu_->stop() : read() - start_;
    if (total_) *total_ += seconds;
    else log_->push_back(seconds);
  } catch (const std::exception&) {
    // A destructor must not throw; a failed GPU is reported by the next CUDA call.
  }
}

namespace {
// q-th percentile of sorted samples, interpolated linearly (numpy's default).
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}
}  // namespace

TimeStats summarize(std::vector<double> samples, int warmup) {
  TimeStats s;
  s.iters = static_cast<int>(samples.size());
  s.warmup = warmup;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.min = samples.front();
  s.max = samples.back();
  s.median = percentile(samples, 0.5);
  s.p10 = percentile(samples, 0.1);
  s.p90 = percentile(samples, 0.9);
  double sum = 0;
  for (double x : samples) sum += x;
  s.mean = sum / static_cast<double>(samples.size());
  double var = 0;
  for (double x : samples) var += (x - s.mean) * (x - s.mean);
  var /= static_cast<double>(samples.size() > 1 ? samples.size() - 1 : 1);
  s.cv_pct = s.mean > 0 ? 100.0 * std::sqrt(var) / s.mean : 0;
  return s;
}

double percentile_of(std::vector<double> samples, double q) {
  std::sort(samples.begin(), samples.end());
  return percentile(samples, q);
}

RankTimes rank_times(const std::vector<std::vector<double>>& by_rank, bool keep_samples) {
  RankTimes t;
  for (const std::vector<double>& own : by_rank) {
    const TimeStats s = summarize(own);
    t.median.push_back(s.median);
    t.p10.push_back(s.p10);
    t.p90.push_back(s.p90);
    t.p99.push_back(percentile_of(own, 0.99));
    t.cv_pct.push_back(s.cv_pct);
  }
  const double typical = percentile_of(t.median, 0.5);
  for (double m : t.median) t.straggler_score.push_back(typical > 0 ? m / typical : 0);
  // Each iteration's wait: every rank waits for the slowest one (the next
  // barrier), and that wait is charged to the slowest rank.
  t.wait_share.assign(by_rank.size(), 0.0);
  const size_t iters = by_rank.empty() ? 0 : by_rank.front().size();
  double total = 0;
  for (size_t i = 0; i < iters; ++i) {
    size_t slowest = 0;
    for (size_t r = 1; r < by_rank.size(); ++r)
      if (by_rank[r][i] > by_rank[slowest][i]) slowest = r;
    double wait = 0;
    for (const std::vector<double>& own : by_rank) wait += by_rank[slowest][i] - own[i];
    t.wait_share[slowest] += wait;
    total += wait;
  }
  for (double& w : t.wait_share) w = total > 0 ? w / total : 0;
  if (keep_samples) t.samples = by_rank;
  return t;
}

void to_json(nlohmann::json& j, const TimeStats& s) {
  j = {{"unit", "s"},  {"median", s.median}, {"p10", s.p10},       {"p90", s.p90},     {"min", s.min},
       {"max", s.max}, {"mean", s.mean},     {"cv_pct", s.cv_pct}, {"iters", s.iters}, {"warmup", s.warmup}};
  if (!s.per_rank.empty())
    j["per_rank"] = {{"median", s.per_rank.median},
                     {"p10", s.per_rank.p10},
                     {"p90", s.per_rank.p90},
                     {"p99", s.per_rank.p99},
                     {"cv_pct", s.per_rank.cv_pct},
                     {"straggler_score", s.per_rank.straggler_score},
                     {"wait_share", s.per_rank.wait_share}};
  if (!s.per_rank.samples.empty()) j["per_iteration"] = {{"max", s.iteration_max}, {"by_rank", s.per_rank.samples}};
}

IterationClock wall_clock(std::function<void()> sync) {
  auto start = std::make_shared<double>(0.0);
  return {[start] { *start = now_seconds(); },
          [start, sync = std::move(sync)] {
            if (sync) sync();
            return now_seconds() - *start;
          }};
}

TimeStats time_iterations(Communicator& comm, const TimingPlan& plan, const std::function<void()>& fn,
                          const std::function<void()>& sync) {
  return time_iterations(comm, plan, fn, wall_clock(sync));
}

TimeStats time_iterations(Communicator& comm, const TimingPlan& plan, const std::function<void()>& fn,
                          const IterationClock& clock) {
  for (int i = 0; i < plan.warmup; ++i) {
    comm.barrier();
    clock.start();
    fn();
    clock.stop();
  }
  std::vector<double> samples(static_cast<size_t>(plan.iters));
  for (int i = 0; i < plan.iters; ++i) {
    comm.barrier();
    clock.start();
    fn();
    samples[i] = clock.stop();
  }
  // Stats traffic must not pollute the case's communication counters.
  CommStats saved = comm.stats();
  const size_t n = static_cast<size_t>(comm.size()), iters = samples.size();
  std::vector<double> all(n * iters);
  if (comm.device() == Device::host) {
    comm.all_gather(samples.data(), all.data(), iters, DType::f64);
  } else {
    Tensor mine = Tensor::from_values({plan.iters}, samples, DType::f64).to(comm.device());
    Tensor gathered = Tensor::zeros({static_cast<int64_t>(n * iters)}, DType::f64, comm.device());
    comm.all_gather(mine.raw(), gathered.raw(), iters, DType::f64);
    all = gathered.to(Device::host).to_vector();
  }
  comm.stats() = saved;
  std::vector<std::vector<double>> by_rank(n);
  for (size_t r = 0; r < n; ++r) by_rank[r].assign(all.begin() + r * iters, all.begin() + (r + 1) * iters);
  std::vector<double> slowest(iters, 0.0);
  for (size_t i = 0; i < iters; ++i)
    for (size_t r = 0; r < n; ++r) slowest[i] = std::max(slowest[i], by_rank[r][i]);
  TimeStats stats = summarize(slowest, plan.warmup);
  stats.per_rank = rank_times(by_rank, plan.per_iteration);
  if (plan.per_iteration) stats.iteration_max = slowest;
  return stats;
}

}  // namespace sextant
