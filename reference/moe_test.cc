#include "reference/moe.h"

#include <gtest/gtest.h>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "reference/gelu.h"
#include "reference/testing/gradcheck.h"
#include "reference/linear.h"

namespace sextant::ref {
namespace {

Tensor rnd(const Shape& s, const char* name, double scale = 1.0) {
  return random_tensor(s, DType::f64, {21, tensor_id(name), scale});
}

MoeParams params(int64_t h, int64_t f, int e) {
  return {rnd({h, e}, "moe.router", 1.0), rnd({e, h, f}, "moe.w1", 0.5), rnd({e, f, h}, "moe.w2", 0.5)};
}

Tensor expert_weight(const Tensor& w, int e) { return narrow(w, 0, e, 1).reshape({w.dim(1), w.dim(2)}); }

TEST(RefMoe, TopOneIsTheChosenExpertsMlp) {
  const MoeParams p = params(6, 10, 4);
  const Tensor x = rnd({5, 6}, "moe.x");
  MoeConfig c;
  c.experts = 4;
  c.topk = 1;
  const MoeResult r = moe_forward(x, p, c);
  for (int64_t t = 0; t < 5; ++t) {
    const int e = r.routing.expert[t];
    EXPECT_DOUBLE_EQ(r.routing.prob[t], 1.0);  // softmax over one logit
    const Tensor xt = narrow(x, 0, t, 1);
    const Tensor o = linear_forward(gelu_forward(linear_forward(xt, expert_weight(p.w1, e))), expert_weight(p.w2, e));
    for (int64_t i = 0; i < 6; ++i) EXPECT_NEAR(r.y.at(t * 6 + i), o.at(i), 1e-14);
  }
}

TEST(RefMoe, RoutesToTheLargestLogitsWithSoftmaxOverTheChosen) {
  const Tensor logits = Tensor::from_values({2, 4}, {0.1, 2.0, 1.0, -1.0, 3.0, 3.0, 0.0, 1.0}, DType::f64);
  MoeConfig c;
  c.experts = 4;
  c.topk = 2;
  const MoeRouting r = moe_route(logits, c);
  EXPECT_EQ(r.expert, (std::vector<int>{1, 2, 0, 1}));  // a tie goes to the lower expert
  EXPECT_NEAR(r.prob[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_NEAR(r.prob[2], 0.5, 1e-15);
  c.pre_softmax = true;
  const MoeRouting pre = moe_route(logits, c);
  const double sum = std::exp(0.1) + std::exp(2.0) + std::exp(1.0) + std::exp(-1.0);
  EXPECT_NEAR(pre.prob[0], std::exp(2.0) / sum, 1e-15);
}

TEST(RefMoe, FollowsAnotherRunsChoiceOnlyWithinTheTieBand) {
  // Token 0: experts 1 and 2 are 1e-6 apart (of max |l| = 2); token 1: 0.5 apart.
  const Tensor logits = Tensor::from_values({2, 3}, {2.0, 1.0, 1.0 - 1e-6, 2.0, 1.0, 0.5}, DType::f64);
  MoeConfig c;
  c.experts = 3;
  c.topk = 2;
  const std::vector<int> other{2, 0, 2, 0};  // takes expert 2 over 1 for both tokens
  c.follow = &other;
  c.tie_band = 1e-6;  // a band of 2e-6 in these logits
  const MoeRouting r = moe_route(logits, c);
  EXPECT_EQ(r.followed, 1);
  EXPECT_EQ(r.expert, (std::vector<int>{0, 2, 0, 1}));  // token 0 follows, by descending logit; token 1 does not
  EXPECT_NEAR(r.prob[1], std::exp(-1.0 - 1e-6) / (1.0 + std::exp(-1.0 - 1e-6)), 1e-15);
  c.tie_band = 1e-7;  // now 1e-6 is wider than the band
  EXPECT_EQ(moe_route(logits, c).followed, 0);
  const std::vector<int> same{0, 1, 1, 0};  // the own choice in another order: nothing to follow
  c.follow = &same;
  c.tie_band = 1;
  EXPECT_EQ(moe_route(logits, c).followed, 0);
  const std::vector<int> short_table{0, 1};
  c.follow = &short_table;
  EXPECT_THROW(moe_route(logits, c), RuntimeError);
}

TEST(RefMoe, CapacityKeepsTheMostProbableOrTheFirstSlots) {
  // Four tokens, two experts, top-1, cf 1: capacity ceil(4 * 1 / 2) = 2 per expert.
  // Expert 0 gets tokens 0, 1, 2 with probabilities rising; expert 1 only token 3.
  const Tensor logits = Tensor::from_values({4, 2}, {0.1, 0.0, 0.5, 0.0, 0.9, 0.0, 0.0, 1.0}, DType::f64);
  MoeConfig c;
  c.experts = 2;
  c.topk = 1;
  c.pre_softmax = true;  // probabilities that differ between tokens
  c.capacity_factor = 1.0;
  c.drop = MoeDrop::position;
  EXPECT_EQ(moe_route(logits, c).kept, (std::vector<char>{1, 1, 0, 1}));
  c.drop = MoeDrop::probability;
  const MoeRouting r = moe_route(logits, c);
  EXPECT_EQ(r.kept, (std::vector<char>{0, 1, 1, 1}));
  EXPECT_EQ(r.dropped, 1);
  EXPECT_EQ(r.load, (std::vector<int64_t>{2, 1}));
  c.capacity_group = 2;  // groups {0, 1}, {2, 3}: capacity 1 each
  EXPECT_EQ(moe_route(logits, c).kept, (std::vector<char>{0, 1, 1, 1}));
  c.drop = MoeDrop::position;
  EXPECT_EQ(moe_route(logits, c).kept, (std::vector<char>{1, 0, 1, 1}));
}

// Every gradient against central differences of L = <dy, y> + aux + z, in
// the configurations whose backward differs.
void check_gradients(MoeConfig c) {
  const MoeParams p = params(5, 7, c.experts);
  const Tensor x = rnd({6, 5}, "moe.x", 1.5), dy = rnd({6, 5}, "moe.dy");
  const MoeGradients g = moe_backward(dy, x, p, c);
  auto loss = [&](const Tensor& xv, const MoeParams& q) {
    const MoeResult r = moe_forward(xv, q, c);
    return dot(dy, r.y) + r.aux_loss + r.z_loss;
  };
  auto expect = [&](const char* name, const Tensor& analytic, const Tensor& numeric) {
    EXPECT_LT(compare(analytic, numeric).rel_l2, kGradcheckTolerance) << name;
  };
  expect("x", g.dx, numeric_gradient([&](const Tensor& v) { return loss(v, p); }, x));
  expect("router", g.drouter, numeric_gradient([&](const Tensor& v) { return loss(x, {v, p.w1, p.w2}); }, p.router));
  expect("w1", g.dw1, numeric_gradient([&](const Tensor& v) { return loss(x, {p.router, v, p.w2}); }, p.w1));
  expect("w2", g.dw2, numeric_gradient([&](const Tensor& v) { return loss(x, {p.router, p.w1, v}); }, p.w2));
}

TEST(RefMoe, BackwardMatchesFiniteDifferencesTopKSoftmax) {
  MoeConfig c;
  c.experts = 4;
  c.topk = 2;
  c.aux_coeff = 0.3;
  c.z_coeff = 0.05;
  check_gradients(c);
}

TEST(RefMoe, BackwardMatchesFiniteDifferencesPreSoftmaxWithDrops) {
  MoeConfig c;
  c.experts = 4;
  c.topk = 2;
  c.pre_softmax = true;
  c.drop = MoeDrop::probability;
  c.capacity_factor = 0.5;  // capacity ceil(6 * 2 / 4 * 0.5) = 2: some slots dropped
  c.aux_coeff = 0.2;
  c.z_coeff = 0.1;
  const MoeParams p = params(5, 7, c.experts);
  ASSERT_GT(moe_forward(rnd({6, 5}, "moe.x", 1.5), p, c).routing.dropped, 0);
  check_gradients(c);
}

}  // namespace
}  // namespace sextant::ref
