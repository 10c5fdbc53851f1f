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

}  // namespace
}  // namespace sextant
