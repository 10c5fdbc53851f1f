#include "kernels/ops/fp8_recipe.h"

#include <gtest/gtest.h>

#include <cmath>

#include "harness/error.h"
#include "kernels/ops/op_testing.h"

namespace sextant::ops {
namespace {

using testing::f32_matrix;

TEST(Fp8Recipe, FormatsFollowTransformerEnginesDefaults) {
  const Fp8Recipe delayed = default_fp8_recipe(Fp8Scaling::delayed);
  EXPECT_EQ(delayed.format_of(Fp8Role::activation), Fp8Format::e4m3);
  EXPECT_EQ(delayed.format_of(Fp8Role::weight), Fp8Format::e4m3);
  EXPECT_EQ(delayed.format_of(Fp8Role::gradient), Fp8Format::e5m2);  // hybrid
  EXPECT_EQ(default_fp8_recipe(Fp8Scaling::block).format_of(Fp8Role::gradient), Fp8Format::e4m3);
  EXPECT_EQ(default_fp8_recipe(Fp8Scaling::mxfp8).format_of(Fp8Role::gradient), Fp8Format::e4m3);
  EXPECT_THROW(parse_fp8_scaling("tensorwise"), UsageError);
}

TEST(Fp8Recipe, JsonRoundTripsEveryParameter) {
  Fp8Recipe r = default_fp8_recipe(Fp8Scaling::delayed);
  r.history_len = 16, r.amax_algo = AmaxAlgo::most_recent, r.margin = 2, r.formats = Fp8Formats::e4m3;
  const Fp8Recipe back = fp8_recipe_from_json(fp8_recipe_json(r));
  EXPECT_EQ(back.scaling, r.scaling);
  EXPECT_EQ(back.formats, r.formats);
  EXPECT_EQ(back.history_len, 16);
  EXPECT_EQ(back.amax_algo, AmaxAlgo::most_recent);
  EXPECT_EQ(back.margin, 2);
  Fp8Recipe b = default_fp8_recipe(Fp8Scaling::block);
  b.block = 64, b.pow2_scales = false;
  const Fp8Recipe bb = fp8_recipe_from_json(fp8_recipe_json(b));
  EXPECT_EQ(bb.block, 64);
  EXPECT_FALSE(bb.pow2_scales);
}

TEST(Fp8Recipe, BlocksRunAlongTheReduction) {
  const Fp8Recipe block = default_fp8_recipe(Fp8Scaling::block), mx = default_fp8_recipe(Fp8Scaling::mxfp8);
  EXPECT_EQ(fp8_blocks(block, Fp8Role::activation, true).cols, 128);
  EXPECT_EQ(fp8_blocks(block, Fp8Role::activation, true).rows, 1);
  EXPECT_EQ(fp8_blocks(block, Fp8Role::gradient, false).rows, 128);
  EXPECT_EQ(fp8_blocks(block, Fp8Role::weight, false).rows, 128);
  EXPECT_EQ(fp8_blocks(block, Fp8Role::weight, false).cols, 128);
  EXPECT_EQ(fp8_blocks(mx, Fp8Role::weight, true).cols, 32);
  EXPECT_EQ(fp8_blocks(mx, Fp8Role::weight, true).rows, 1);
  EXPECT_EQ(fp8_blocks(default_fp8_recipe(Fp8Scaling::current), Fp8Role::weight, true).cols, 0);
}

TEST(Fp8Recipe, CurrentScalingPutsTheAmaxOnTheLargestValue) {
  const Fp8Tensor q = quantize_fp8(f32_matrix(2, 2, {0.5, -4, 1, 2}), Fp8Role::activation, true,
                                   default_fp8_recipe(Fp8Scaling::current));
  ASSERT_EQ(q.scale_inv.size(), 1u);
  EXPECT_EQ(q.amax, 4);
  EXPECT_EQ(q.scale_inv[0], 4.0f / 448);
  EXPECT_EQ(q.dequantize().to_vector()[1], -4);
  EXPECT_EQ(fp8_decode(q.codes[1], Fp8Format::e4m3), -448);
}

TEST(Fp8Recipe, BlockScalesArePowersOfTwoPerRaggedBlock) {
  Fp8Recipe r = default_fp8_recipe(Fp8Scaling::block);
  r.block = 2;
  // [1, 5] along the reduction: blocks (1, -3), (0.25, 0.5), (7).
  const Fp8Tensor q = quantize_fp8(f32_matrix(1, 5, {1, -3, 0.25, 0.5, 7}), Fp8Role::activation, true, r);
  ASSERT_EQ(q.scale_inv.size(), 3u);
  EXPECT_EQ(q.scale_inv[0], 1.0f / 128);  // 448 / 3 rounded down to a power of two
  EXPECT_EQ(q.scale_inv[1], 1.0f / 512);
  EXPECT_EQ(q.scale_inv[2], 1.0f / 64);
  r.pow2_scales = false;
  const Fp8Tensor f = quantize_fp8(f32_matrix(1, 5, {1, -3, 0.25, 0.5, 7}), Fp8Role::activation, true, r);
  EXPECT_EQ(f.scale_inv[0], 1.0f / (448.0f / 3.0f));
  // A weight tile is block x block: [3, 3] in 2 x 2 tiles has four.
  EXPECT_EQ(quantize_fp8(f32_matrix(3, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9}), Fp8Role::weight, false, r).scale_inv.size(),
            4u);
}

TEST(Fp8Recipe, MxScalesAreE8m0AndNeverSaturate) {
  const Fp8Recipe r = default_fp8_recipe(Fp8Scaling::mxfp8);
  const Fp8Tensor q = quantize_fp8(f32_matrix(1, 3, {449, -1, 0.5}), Fp8Role::activation, true, r);
  ASSERT_EQ(q.scale_inv.size(), 1u);
  EXPECT_EQ(q.scale_inv[0], 2.0f);                // 449 / 448 rounds up to 2^1
  EXPECT_EQ(q.dequantize().to_vector()[0], 448);  // 449 / 2 = 224.5 casts to 224 (spacing 16 on [128, 256))
}

TEST(Fp8Recipe, DelayedScalingRollsItsHistory) {
  Fp8Recipe r = default_fp8_recipe(Fp8Scaling::delayed);
  r.history_len = 2;
  DelayedScaling d(r, Fp8Format::e4m3);
  EXPECT_EQ(d.scale(), 1);
  d.update(1);
  EXPECT_EQ(d.scale(), 448);
  d.update(2);
  EXPECT_EQ(d.scale(), 224);
  d.update(0.5);  // window {0.5, 2}
  EXPECT_EQ(d.scale(), 224);
  d.update(0.5);  // window {0.5, 0.5}
  EXPECT_EQ(d.scale(), 896);
  EXPECT_EQ(d.history().size(), 2u);
  r.amax_algo = AmaxAlgo::most_recent, r.margin = 1;
  DelayedScaling m(r, Fp8Format::e5m2);
  m.update(8), m.update(2);
  EXPECT_EQ(m.scale(), 57344.0f / 2 / 2);
  m.update(0);  // no amax: the scale stays
  EXPECT_EQ(m.scale(), 57344.0f / 2 / 2);
}

TEST(Fp8Recipe, DelayedScalingSaturatesWhatOutgrowsTheHistory) {
  Fp8Recipe r = default_fp8_recipe(Fp8Scaling::delayed);
  DelayedScaling d(r, Fp8Format::e4m3);
  d.update(1);
  const Fp8Tensor q = quantize_fp8(f32_matrix(1, 2, {2, -1}), Fp8Role::weight, false, r, &d);
  EXPECT_EQ(q.dequantize().to_vector()[0], 1);  // 2 x 448 saturates to 448, scale_inv 1 / 448
  EXPECT_EQ(q.amax, 2);
  EXPECT_THROW(quantize_fp8(f32_matrix(1, 2, {2, -1}), Fp8Role::weight, false, r), RuntimeError);
}

}  // namespace
}  // namespace sextant::ops
