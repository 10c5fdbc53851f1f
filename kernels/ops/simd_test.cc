#include "kernels/ops/simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ops/vector_math.h"

namespace sextant::ops {
namespace {

float exp_lane0(float x) { return vexp(f32v<16>{} + x)[0]; }

// Distance in units in the last place between two positive floats.
int64_t ulps(float a, float b) {
  return std::abs(static_cast<int64_t>(std::bit_cast<int32_t>(a)) - static_cast<int64_t>(std::bit_cast<int32_t>(b)));
}

TEST(Simd, ExpIsWithinTwoUlpWhereResultsAreNormal) {
  // e^x >= FLT_MIN from x = -87.33; below that results are subnormal (and
  // flushed to 0 below -87.68), checked in absolute terms next.
  int64_t worst = 0;
  float worst_x = 0;
  for (float x = -87.3f; x <= 88.0f; x += 0.000731f) {
    const int64_t d = ulps(exp_lane0(x), static_cast<float>(std::exp(static_cast<double>(x))));
    if (d > worst) worst = d, worst_x = x;
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
}

TEST(Simd, ScalarAndVectorExpAgreeBitwise) {
  for (float x = -90.0f; x <= 90.0f; x += 0.0173f) {
    EXPECT_EQ(vexp(x), exp_lane0(x)) << x;
    EXPECT_EQ(vexp(f32v<4>{} + x)[3], exp_lane0(x)) << x;
    EXPECT_EQ(vexp(f32v<8>{} + x)[7], exp_lane0(x)) << x;
  }
}

TEST(Simd, RunsAtEveryWidthUpToTheCpus) {
  const int widest = simd_lanes();
  EXPECT_TRUE(widest == 4 || widest == 8 || widest == 16);
  for (int cap : {4, 8, 16}) {
    const int previous = limit_simd_lanes(cap);
    int seen = 0;
    run_simd([&](auto lanes) SEXTANT_INLINE_LAMBDA { seen = decltype(lanes)::value; });
    EXPECT_EQ(seen, std::min(cap, widest));
    limit_simd_lanes(previous);
  }
}

TEST(Simd, ExpHandlesTheEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_lane0(0.0f), 1.0f);
  EXPECT_EQ(exp_lane0(-100.0f), 0.0f);
  EXPECT_EQ(exp_lane0(-inf), 0.0f);                                 // masked logits
  EXPECT_LT(std::abs(exp_lane0(-87.5f) - std::exp(-87.5)), 1e-44);  // subnormal result, gradual underflow
  EXPECT_EQ(exp_lane0(-87.8f), 0.0f);                               // n = -127: flushed (true value 7.4e-39)
  EXPECT_TRUE(std::isnan(exp_lane0(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isfinite(exp_lane0(inf)));  // saturates near 2.4e38 (documented)
  EXPECT_GT(exp_lane0(inf), 1e38f);
  EXPECT_EQ(vexp(1.0), std::exp(1.0));  // f64 compute keeps libm
}

TEST(Simd, MapCoversTheTailWithTheSameArithmetic) {
  // 37 = 2 full blocks + 5: the tail goes through a padded block, so element
  // i gets exactly what a full block would give it.
  std::vector<float> x(37), y(37, -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i) - 4.0f;
  auto twice_exp = [](auto v) SEXTANT_INLINE_LAMBDA { return vexp(v) * 2.0f; };
  map_lanes<16, float>(37, y.data(), twice_exp, x.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], 2.0f * exp_lane0(x[i])) << i;
}

TEST(Simd, SumMapSkipsThePaddedLanes) {
  // exp(0) = 1 on the 11 padded lanes would add 11 if they were summed.
  std::vector<float> x(21, 1.0f);
  auto exp_minus_one = [](auto v) SEXTANT_INLINE_LAMBDA { return vexp(v - 1.0f); };
  EXPECT_EQ((sum_map_lanes<16, float>(21, exp_minus_one, x.data())), 21.0f);
  std::vector<double> xd(5, 2.0);
  auto square = [](auto v) { return v * v; };
  EXPECT_EQ((sum_map_lanes<16, double>(5, square, xd.data())), 20.0);
}

}  // namespace
}  // namespace sextant::ops
