#include "reference/fp8.h"

#include <gtest/gtest.h>

#include <cmath>

#include "harness/rng.h"

namespace sextant::ref {
namespace {

TEST(RefFp8, ValuesFollowTheSpecsRangeAndReservedCodes) {
  const std::vector<double> e4m3 = fp8_values(kE4m3Grid), e5m2 = fp8_values(kE5m2Grid);
  ASSERT_EQ(e4m3.size(), 127u);  // codes 0x00..0x7e; 0x7f is NaN
  ASSERT_EQ(e5m2.size(), 124u);  // codes 0x00..0x7b; 0x7c.. are infinity and NaNs
  EXPECT_EQ(e4m3.back(), 448);
  EXPECT_EQ(e5m2.back(), 57344);
  EXPECT_EQ(e4m3[1], std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(e4m3[8], std::ldexp(1.0, -6));  // smallest normal
  EXPECT_EQ(e5m2[1], std::ldexp(1.0, -16));
  EXPECT_EQ(e5m2[4], std::ldexp(1.0, -14));
  for (size_t i = 1; i < e4m3.size(); ++i) EXPECT_LT(e4m3[i - 1], e4m3[i]);
}

TEST(RefFp8, CastRoundsToNearestEvenAndSaturates) {
  // E4M3 spacing is 2 on [16, 32): 17 ties 16 (code 0x58, even) and 18; 19 ties 18 and 20 (0x5a).
  EXPECT_EQ(fp8_cast(17, kE4m3Grid), 16);
  EXPECT_EQ(fp8_cast(19, kE4m3Grid), 20);
  EXPECT_EQ(fp8_cast(17.01, kE4m3Grid), 18);
  EXPECT_EQ(fp8_cast(-19, kE4m3Grid), -20);
  EXPECT_EQ(fp8_cast(449, kE4m3Grid), 448);
  EXPECT_EQ(fp8_cast(1e30, kE4m3Grid), 448);
  EXPECT_EQ(fp8_cast(-70000, kE5m2Grid), -57344);
  EXPECT_EQ(fp8_cast(std::ldexp(1.0, -10), kE4m3Grid), 0);  // half the smallest subnormal ties to zero
  EXPECT_EQ(fp8_cast(std::ldexp(3.0, -10), kE4m3Grid), std::ldexp(1.0, -8));  // 1.5 subnormals ties to 2
  EXPECT_THROW(fp8_cast(INFINITY, kE4m3Grid), std::exception);
}

TEST(RefFp8, CurrentScalingMapsTheAmaxToTheLargestValue) {
  const Tensor x = Tensor::from_values({1, 3}, {-2, 1, 0.5}, DType::f64);
  const Fp8Quantized q = fp8_quantize(x, {kE4m3Grid});
  ASSERT_EQ(q.scale_inv.size(), 1u);
  EXPECT_EQ(q.amax, 2);
  EXPECT_EQ(q.scale_inv[0], static_cast<float>(2.0 / 448));
  EXPECT_EQ(q.value.to_vector()[0], -2);  // cast(-448) = -448 exactly
}

TEST(RefFp8, BlocksHaveTheirOwnScalesAndRaggedEdges) {
  // [2, 5] in 1 x 2 blocks: per row the blocks (0, 1), (2, 3) and the short (4).
  const Tensor x = Tensor::from_values({2, 5}, {1, -3, 0.25, 0.5, 7, 1, 1, 1, 1, 1}, DType::f64);
  const Fp8Quantized q = fp8_quantize(x, {kE4m3Grid, 1, 2, Fp8ScaleRule::amax_pow2});
  ASSERT_EQ(q.scale_inv.size(), 6u);
  // 448 / 3 = 149.3 -> 128; 448 / 0.5 = 896 -> 512; 448 / 7 = 64; 448 -> 256.
  EXPECT_EQ(q.scale_inv[0], 1.0 / 128);
  EXPECT_EQ(q.scale_inv[1], 1.0 / 512);
  EXPECT_EQ(q.scale_inv[2], 1.0 / 64);
  EXPECT_EQ(q.scale_inv[3], 1.0 / 256);
  EXPECT_EQ(q.scale_inv[5], 1.0 / 256);
  EXPECT_EQ(q.amax, 7);
}

TEST(RefFp8, MxScalesArePowersOfTwoThatNeverSaturate) {
  // amax 448 fits exactly (e = 0); 449 needs e = 1 so that 449 / 2 fits.
  for (double amax : {448.0, 449.0, 1.0, 3e-3}) {
    const Tensor x = Tensor::from_values({1, 2}, {amax, -amax / 3}, DType::f64);
    const Fp8Quantized q = fp8_quantize(x, {kE4m3Grid, 1, 32, Fp8ScaleRule::mx_exponent});
    const double e = std::log2(q.scale_inv[0]);
    EXPECT_EQ(e, std::round(e)) << amax;
    EXPECT_LE(amax / q.scale_inv[0], 448) << amax;
    EXPECT_GT(amax / q.scale_inv[0], 224) << amax;
  }
}

TEST(RefFp8, QuantizationErrorStaysWithinTheUnitRoundoff) {
  const Tensor x = random_tensor({16, 64}, DType::f64, {3, tensor_id("ref.fp8.x")});
  for (const Fp8Grid& g : {kE4m3Grid, kE5m2Grid}) {
    const Fp8Quantized q = fp8_quantize(x, {g, 1, 16, Fp8ScaleRule::amax});
    const double u = std::ldexp(1.0, -(g.mantissa_bits + 1));
    const std::vector<double> a = x.to_vector(), b = q.value.to_vector();
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::fabs(a[i]) * 448 / q.amax <= 1) continue;  // subnormal after scaling: absolute error only
      EXPECT_LE(std::fabs(b[i] - a[i]), 1.0001 * u * std::fabs(a[i])) << i;
    }
  }
}

TEST(RefFp8, DelayedScaleUsesTheWindowBeforeTheStep) {
  EXPECT_EQ(delayed_scale({}, 4, true, 0, 448), 1);
  EXPECT_EQ(delayed_scale({1, 2, 0.5}, 2, true, 0, 448), 224);  // window {2, 0.5}
  EXPECT_EQ(delayed_scale({1, 2, 0.5}, 1, true, 0, 448), 896);
  EXPECT_EQ(delayed_scale({1, 2, 0.5}, 8, false, 0, 448), 896);  // most recent
  EXPECT_EQ(delayed_scale({1, 2, 0.5}, 8, true, 1, 448), 112);   // margin 1 halves it
  EXPECT_EQ(delayed_scale({4, 0}, 8, false, 0, 448), 112);       // a zero amax keeps the scale
}

}  // namespace
}  // namespace sextant::ref
