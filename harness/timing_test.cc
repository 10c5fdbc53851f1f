#include "harness/timing.h"

#include <gtest/gtest.h>

namespace sextant {
namespace {

TEST(Timing, SummaryMatchesNumpyPercentiles) {
  TimeStats s = summarize({5, 1, 4, 2, 3}, 2);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.p10, 1.4);  // numpy.percentile([1..5], 10)
  EXPECT_DOUBLE_EQ(s.p90, 4.6);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_NEAR(s.cv_pct, 100 * 1.5811388300841898 / 3, 1e-9);  // sample stddev
  EXPECT_EQ(s.iters, 5);
  EXPECT_EQ(s.warmup, 2);
}

// Busy work the optimizer keeps: the CPU clock must see it.
double spin(int n) {
  volatile double x = 0;
  for (int i = 0; i < n; ++i) x = x + 1e-9 * i;
  return x;
}

TEST(ScopedTimer, AddsItsScopeToTheTotalOnEachClock) {
  for (TimerClock clock : {TimerClock::wall, TimerClock::process_cpu}) {
    double total = 0.5;
    {
      ScopedTimer t(&total, clock);
      spin(2000000);
    }
    EXPECT_GT(total, 0.5) << static_cast<int>(clock);
    EXPECT_LT(total, 10.0);
  }
  {
    ScopedTimer nothing(nullptr, TimerClock::wall);  // measures nothing, writes nowhere
  }
  std::vector<double> log;
  for (int i = 0; i < 2; ++i) {
    ScopedTimer t(log, TimerClock::process_cpu);
    spin(100000);
  }
  ASSERT_EQ(log.size(), 2u);
  EXPECT_GE(log[0], 0.0);
}

TEST(ScopedTimer, PicksTheHostClocksOnTheHost) {
  EXPECT_EQ(wall_clock_on(Device::host), TimerClock::wall);
  EXPECT_EQ(compute_clock_on(Device::host), TimerClock::process_cpu);
  EXPECT_EQ(wall_clock_on(Device::cuda), TimerClock::wall_synced);
  EXPECT_EQ(compute_clock_on(Device::cuda), TimerClock::device);
  const double t0 = thread_cpu_seconds();
  spin(1000000);
  EXPECT_GT(thread_cpu_seconds(), t0);
}

}  // namespace
}  // namespace sextant
