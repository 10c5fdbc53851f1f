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

// Three ranks; rank 2 is the slowest in every iteration but the last.
TEST(RankTimes, ScoresEachRankAgainstTheOthersAndChargesTheWait) {
  const std::vector<std::vector<double>> by_rank = {{1.0, 1.0, 1.0, 1.2}, {1.0, 1.1, 0.9, 1.0}, {2.0, 2.0, 2.0, 1.0}};
  const RankTimes t = rank_times(by_rank, false);
  ASSERT_EQ(t.median.size(), 3u);
  EXPECT_DOUBLE_EQ(t.median[2], 2.0);
  EXPECT_DOUBLE_EQ(t.straggler_score[0], 1.0);  // the median of the medians is rank 0's 1.0
  EXPECT_DOUBLE_EQ(t.straggler_score[2], 2.0);
  // Waits: iterations 0-2 charge rank 2 with 2.0, 1.9, 2.1; iteration 3 charges rank 0 with 0.2 + 0.2.
  EXPECT_NEAR(t.wait_share[2], 6.0 / 6.4, 1e-12);
  EXPECT_NEAR(t.wait_share[0], 0.4 / 6.4, 1e-12);
  EXPECT_DOUBLE_EQ(t.wait_share[1], 0.0);
  EXPECT_NEAR(t.p99[0], 1.194, 1e-12);
  EXPECT_TRUE(t.samples.empty());
  EXPECT_EQ(rank_times(by_rank, true).samples, by_rank);
}

TEST(RankTimes, EqualRanksWaitForNobody) {
  const RankTimes t = rank_times({{1.0, 2.0}, {1.0, 2.0}}, false);
  EXPECT_EQ(t.wait_share, (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(t.straggler_score, (std::vector<double>{1.0, 1.0}));
}

}  // namespace
}  // namespace sextant
