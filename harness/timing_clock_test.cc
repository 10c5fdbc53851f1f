// time_iterations measures each iteration with the clock it is given (GPU
// runs pass CUDA events): warm-up iterations are measured and dropped, and
// each sample is the max over ranks.
#include <gtest/gtest.h>

#include "harness/testing/mpi_world.h"
#include "harness/timing.h"

namespace sextant {
namespace {

using testing::world;

TEST(TimingClock, SamplesComeFromTheGivenClockMaxOverRanks) {
  int starts = 0, stops = 0, runs = 0;
  // A fake clock whose readings are known: iteration i on rank r takes i + r.
  IterationClock clock{[&] { ++starts; }, [&] { return static_cast<double>(stops++) + world().rank(); }};
  TimeStats s = time_iterations(
      world(), TimingPlan{2, 3}, [&] { ++runs; }, clock);
  EXPECT_EQ(runs, 5);
  EXPECT_EQ(starts, 5);
  EXPECT_EQ(stops, 5);
  // Readings 0 and 1 are warm-up; 2, 3, 4 are kept, plus the highest rank.
  const double top = world().size() - 1;
  EXPECT_DOUBLE_EQ(s.min, 2 + top);
  EXPECT_DOUBLE_EQ(s.max, 4 + top);
  EXPECT_EQ(s.iters, 3);
  EXPECT_EQ(s.warmup, 2);
}

TEST(TimingClock, WallClockRunsTheSyncBeforeReading) {
  bool synced = false;
  IterationClock clock = wall_clock([&] { synced = true; });
  clock.start();
  EXPECT_FALSE(synced);
  clock.stop();
  EXPECT_TRUE(synced);
}

}  // namespace
}  // namespace sextant
