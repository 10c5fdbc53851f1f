// FP8 linears under MPI (1, 2 and 4 ranks): with per-tensor scales every
// rank casts a sharded weight, a sharded gradient and a DP-split input
// with the scale of the whole tensor, the one one rank computes from it;
// without the TP reduction (the planted fault) the shards' scales differ;
// delayed scaling rolls its history once per step.
#include <gtest/gtest.h>

#include <bit>

#include "harness/rng.h"
#include "harness/testing/mpi_world.h"
#include "kernels/tensor_parallel/fp8_linear.h"

namespace sextant::tp {
namespace {

using ops::Fp8Role;
using testing::world;

constexpr int64_t kTokens = 6, kIn = 8, kOutPerRank = 4;

RandomSpec spec(const char* name) { return {7, tensor_id(name), 1.0}; }

// The whole weight [in, out] and this rank's column shard of it.
Tensor full_weight() { return random_tensor({kIn, kOutPerRank * world().size()}, DType::f32, spec("w")); }
Tensor weight_shard() {
  const int n = world().size();
  return random_block({kIn, kOutPerRank * n}, {0, kOutPerRank * world().rank()}, {kIn, kOutPerRank}, DType::f32,
                      spec("w"));
}

// The decode scale one rank takes for the whole tensor.
float whole_tensor_scale_inv(const Tensor& whole, Fp8Role role, const ops::Fp8Recipe& recipe) {
  const ops::DelayedScaling initial(recipe, recipe.format_of(role));
  return ops::quantize_fp8(whole, role, false, recipe, &initial).scale_inv.front();
}

// Whether every rank's value equals the others' (bit for bit).
bool same_on_every_rank(float v) {
  float lo = v, hi = v;
  world().all_reduce(&lo, &lo, 1, DType::f32, ReduceOp::min);
  world().all_reduce(&hi, &hi, 1, DType::f32, ReduceOp::max);
  return std::bit_cast<uint32_t>(lo) == std::bit_cast<uint32_t>(hi);
}

TEST(Fp8Linear, ShardedWeightsAndGradientsTakeTheWholeTensorsScale) {
  const ops::Fp8Recipe recipe = ops::default_fp8_recipe(ops::Fp8Scaling::current);
  const TpGroup g{world()};
  Fp8LinearState s(recipe);
  const Tensor x = random_tensor({kTokens, kIn}, DType::f32, spec("x"));  // replicated: the column-parallel input
  const Tensor y = fp8_matmul(g, s, x, weight_shard());
  EXPECT_EQ(y.shape(), (Shape{kTokens, kOutPerRank}));
  const float w_scale = s.scale_inv[static_cast<int>(Fp8Operand::weight)];
  EXPECT_EQ(std::bit_cast<uint32_t>(w_scale),
            std::bit_cast<uint32_t>(whole_tensor_scale_inv(full_weight(), Fp8Role::weight, recipe)));
  // The output gradient [tokens, out/tp] is sharded like the weight's columns.
  const int n = world().size();
  const Shape dy_global{kTokens, kOutPerRank * n};
  const Tensor dy =
      random_block(dy_global, {0, kOutPerRank * world().rank()}, {kTokens, kOutPerRank}, DType::f32, spec("dy"));
  const Tensor dx = fp8_matmul_wt(g, s, dy, weight_shard());
  EXPECT_EQ(dx.shape(), (Shape{kTokens, kIn}));
  const float dy_scale = s.scale_inv[static_cast<int>(Fp8Operand::output_grad)];
  EXPECT_EQ(std::bit_cast<uint32_t>(dy_scale),
            std::bit_cast<uint32_t>(
                whole_tensor_scale_inv(random_tensor(dy_global, DType::f32, spec("dy")), Fp8Role::gradient, recipe)));
}

TEST(Fp8Linear, DataParallelTokensTakeTheWholeBatchsScale) {
  const ops::Fp8Recipe recipe = ops::default_fp8_recipe(ops::Fp8Scaling::current);
  std::unique_ptr<Communicator> self = world().split(world().rank(), 0);
  TpGroup g{*self};
  g.amax_dp = &world();  // every rank a DP replica holding kTokens of the batch
  Fp8LinearState s(recipe);
  const int n = world().size();
  const Shape batch{kTokens * n, kIn};
  const Tensor x = random_block(batch, {kTokens * world().rank(), 0}, {kTokens, kIn}, DType::f32, spec("x"));
  fp8_matmul(g, s, x, random_tensor({kIn, kOutPerRank}, DType::f32, spec("w")));
  EXPECT_EQ(std::bit_cast<uint32_t>(s.scale_inv[static_cast<int>(Fp8Operand::input)]),
            std::bit_cast<uint32_t>(
                whole_tensor_scale_inv(random_tensor(batch, DType::f32, spec("x")), Fp8Role::activation, recipe)));
}

TEST(Fp8Linear, WithoutTheTpReductionShardsScaleAlone) {
  if (world().size() < 2) GTEST_SKIP() << "needs a weight split over 2+ ranks";
  TpGroup g{world()};
  g.fault = Fault::fp8_amax_not_reduced_over_tp;
  Fp8LinearState s(ops::default_fp8_recipe(ops::Fp8Scaling::current));
  fp8_matmul(g, s, random_tensor({kTokens, kIn}, DType::f32, spec("x")), weight_shard());
  EXPECT_FALSE(same_on_every_rank(s.scale_inv[static_cast<int>(Fp8Operand::weight)]));
}

TEST(Fp8Linear, DelayedScalingRollsItsHistoryOncePerStep) {
  const ops::Fp8Recipe recipe = ops::default_fp8_recipe(ops::Fp8Scaling::delayed);
  const TpGroup g{world()};
  Fp8LinearState s(recipe);
  const int w = static_cast<int>(Fp8Operand::weight);
  const Tensor x = random_tensor({kTokens, kIn}, DType::f32, spec("x"));
  const float amax = ops::fp8_amax(full_weight());  // each step's, reduced over the shards
  fp8_matmul(g, s, x, weight_shard());
  EXPECT_EQ(s.scale_inv[w], 1.0f);  // no history yet: scale 1
  fp8_end_step(s);
  ASSERT_EQ(s.delayed[w].history().size(), 1u);
  EXPECT_EQ(s.delayed[w].history().front(), amax);
  fp8_matmul(g, s, x, weight_shard());
  EXPECT_EQ(s.scale_inv[w], 1.0f / (448.0f / amax));  // E4M3's max over the first step's amax
  fp8_end_step(s);
  EXPECT_EQ(s.delayed[w].history().size(), 2u);
  EXPECT_TRUE(same_on_every_rank(s.delayed[w].scale()));
}

// A pipeline casts an operand once per microbatch: the history takes the step's largest amax.
TEST(Fp8Linear, AStepsAmaxIsTheLargestOfItsCasts) {
  const TpGroup g{world()};
  Fp8LinearState s(ops::default_fp8_recipe(ops::Fp8Scaling::delayed));
  const int in = static_cast<int>(Fp8Operand::input);
  const Tensor small = random_tensor({kTokens, kIn}, DType::f32, spec("x"));
  Tensor large = small.clone();
  for (int64_t i = 0; i < large.numel(); ++i) large.data<float>()[i] *= 4;
  fp8_matmul(g, s, large, weight_shard());
  fp8_matmul(g, s, small, weight_shard());
  fp8_end_step(s);
  EXPECT_EQ(s.delayed[in].history().front(), ops::fp8_amax(large));
  EXPECT_EQ(s.amax[in], 0.0f);  // the next step starts afresh
}

}  // namespace
}  // namespace sextant::tp
