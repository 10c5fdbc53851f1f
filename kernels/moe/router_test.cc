#include "kernels/moe/router.h"

#include <gtest/gtest.h>

#include "harness/error.h"
#include "harness/rng.h"
#include "harness/testing/mpi_world.h"
#include "reference/moe.h"

namespace sextant::moe {
namespace {

using testing::world;

struct Problem {
  Tensor x, w;  // [T, h], [h, E]
};
Problem problem(int64_t t, int64_t h, int e) {
  return {random_tensor({t, h}, DType::f32, {5, tensor_id("router.x"), 1.0}),
          random_tensor({h, e}, DType::f32, {5, tensor_id("router.w"), 1.0})};
}

ref::MoeConfig ref_config(const RouterOptions& o) {
  ref::MoeConfig c;
  c.experts = o.experts;
  c.topk = o.topk;
  c.pre_softmax = o.pre_softmax;
  c.drop = o.drop == DropPolicy::none          ? ref::MoeDrop::none
           : o.drop == DropPolicy::probability ? ref::MoeDrop::probability
                                               : ref::MoeDrop::position;
  c.capacity_factor = o.capacity_factor;
  c.capacity_group = o.capacity_group;
  c.aux_coeff = o.aux_coeff;
  c.z_coeff = o.z_coeff;
  return c;
}

void expect_same_routing(const Problem& p, const RouterOptions& o) {
  const Routing r = route(p.x, p.w, o, world());
  const ref::MoeRouting want = ref::moe_route(ref::moe_router_logits(p.x, p.w), ref_config(o));
  ASSERT_EQ(r.slots.slots(), static_cast<int64_t>(want.expert.size()));
  for (int64_t s = 0; s < r.slots.slots(); ++s) {
    EXPECT_EQ(r.slots.expert[s], want.expert[s]) << "slot " << s;
    EXPECT_EQ(r.slots.kept[s] != 0, want.kept[s] != 0) << "slot " << s;
    EXPECT_NEAR(r.slots.prob[s], want.prob[s], 1e-6) << "slot " << s;
  }
  EXPECT_EQ(r.dropped, want.dropped);
}

TEST(MoeRouter, TopKAndProbabilitiesMatchTheReference) {
  if (world().size() != 1) GTEST_SKIP() << "single-rank test";
  const Problem p = problem(40, 8, 6);
  RouterOptions o;
  o.experts = 6;
  for (int k : {1, 2, 3})
    for (bool pre : {false, true}) {
      o.topk = k;
      o.pre_softmax = pre;
      expect_same_routing(p, o);
    }
}

TEST(MoeRouter, CapacityDropsWhatTheReferenceDrops) {
  if (world().size() != 1) GTEST_SKIP() << "single-rank test";
  const Problem p = problem(48, 8, 4);
  RouterOptions o;
  o.experts = 4;
  o.topk = 2;
  o.capacity_factor = 0.75;
  for (DropPolicy d : {DropPolicy::probability, DropPolicy::position})
    for (int64_t group : {0, 12}) {
      o.drop = d;
      o.capacity_group = group;
      expect_same_routing(p, o);
      EXPECT_GT(route(p.x, p.w, o, world()).dropped, 0);
    }
  EXPECT_EQ(expert_capacity(12, 2, 4, 0.75), 5);  // ceil(12 * 2 / 4 * 0.75) = ceil(4.5)
}

TEST(MoeRouter, WrongDropFaultKeepsOtherSlots) {
  if (world().size() != 1) GTEST_SKIP() << "single-rank test";
  const Problem p = problem(48, 8, 4);
  RouterOptions o;
  o.experts = 4;
  o.drop = DropPolicy::probability;
  o.capacity_factor = 0.75;
  const Routing good = route(p.x, p.w, o, world());
  o.fault_wrong_drop = true;
  const Routing bad = route(p.x, p.w, o, world());
  EXPECT_EQ(good.dropped, bad.dropped);
  EXPECT_NE(good.slots.kept, bad.slots.kept);
}

TEST(MoeRouter, LossesMatchTheReference) {
  if (world().size() != 1) GTEST_SKIP() << "single-rank test";
  const Problem p = problem(32, 8, 8);
  RouterOptions o;
  o.experts = 8;
  o.aux_coeff = 0.01;
  o.z_coeff = 0.001;
  const Routing r = route(p.x, p.w, o, world());
  ref::MoeParams params{p.w, Tensor::zeros({8, 8, 2}, DType::f64), Tensor::zeros({8, 2, 8}, DType::f64)};
  const ref::MoeResult want = ref::moe_forward(p.x, params, ref_config(o));
  EXPECT_NEAR(r.aux_loss, want.aux_loss, 1e-6 * want.aux_loss);
  EXPECT_NEAR(r.z_loss, want.z_loss, 1e-6 * want.z_loss);
  EXPECT_EQ(r.global_tokens, 32);
}

TEST(MoeRouter, NamesRoundTripAndBadNamesAreUsageErrors) {
  for (DropPolicy d : {DropPolicy::none, DropPolicy::probability, DropPolicy::position})
    EXPECT_EQ(parse_drop_policy(drop_policy_name(d)), d);
  EXPECT_THROW(parse_drop_policy("random"), UsageError);
}

}  // namespace
}  // namespace sextant::moe
