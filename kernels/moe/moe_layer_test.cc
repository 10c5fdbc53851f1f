// The layer on one rank (both dispatchers degenerate to local permutes)
// against the float64 reference, in f32: forward, every gradient, the losses.
// The suite checks every rank count and parallel layout.
#include "kernels/moe/moe_layer.h"

#include <gtest/gtest.h>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "harness/testing/mpi_world.h"
#include "reference/moe.h"

namespace sextant::moe {
namespace {

using testing::world;

constexpr int64_t kT = 24, kH = 8, kF = 12;

Tensor rnd(const Shape& s, const char* name, double scale) {
  return random_tensor(s, DType::f32, {9, tensor_id(name), scale});
}

void check_layer(const MoeOptions& o) {
  const int e = o.router.experts;
  const Tensor x = rnd({kT, kH}, "layer.x", 1.0), dy = rnd({kT, kH}, "layer.dy", 1.0);
  const ref::MoeParams p{rnd({kH, e}, "layer.router", 1.0), rnd({e, kH, kF}, "layer.w1", 0.5),
                         rnd({e, kF, kH}, "layer.w2", 0.5)};
  MoeWeights w{p.router, {}, {}};
  for (int i = 0; i < e; ++i) {
    w.w1.push_back(narrow(p.w1, 0, i, 1).reshape({kH, kF}));
    w.w2.push_back(narrow(p.w2, 0, i, 1).reshape({kF, kH}));
  }
  MoeLayer layer(o, {&world(), &world(), &world(), &world()}, w);
  const Tensor y = layer.forward(x);
  const MoeGrads g = layer.backward(dy);

  ref::MoeConfig c;
  c.experts = e;
  c.topk = o.router.topk;
  c.pre_softmax = o.router.pre_softmax;
  c.drop = o.router.drop == DropPolicy::none          ? ref::MoeDrop::none
           : o.router.drop == DropPolicy::probability ? ref::MoeDrop::probability
                                                      : ref::MoeDrop::position;
  c.capacity_factor = o.router.capacity_factor;
  c.aux_coeff = o.router.aux_coeff;
  c.z_coeff = o.router.z_coeff;
  const ref::MoeResult fwd = ref::moe_forward(x, p, c);
  const ref::MoeGradients ref = ref::moe_backward(dy, x, p, c);
  const double tol = 1e-5;
  EXPECT_LT(compare(y, fwd.y).rel_l2, tol);
  EXPECT_LT(compare(g.dx, ref.dx).rel_l2, tol);
  EXPECT_LT(compare(g.router, ref.drouter).rel_l2, tol);
  std::vector<Tensor> w1(g.w1), w2(g.w2);
  for (Tensor& t : w1) t = t.reshape({1, kH, kF});
  for (Tensor& t : w2) t = t.reshape({1, kF, kH});
  EXPECT_LT(compare(concat(w1, 0), ref.dw1).rel_l2, tol);
  EXPECT_LT(compare(concat(w2, 0), ref.dw2).rel_l2, tol);
  EXPECT_NEAR(layer.routing().aux_loss, fwd.aux_loss, 1e-6 * fwd.aux_loss + 1e-12);
  EXPECT_EQ(layer.routing().dropped, fwd.routing.dropped);
}

TEST(MoeLayer, OneRankMatchesTheReference) {
  if (world().size() != 1) GTEST_SKIP() << "single-rank test";
  for (DispatcherKind d : {DispatcherKind::alltoall, DispatcherKind::allgather})
    for (int k : {1, 2}) {
      MoeOptions o;
      o.dispatcher = d;
      o.router.experts = 4;
      o.router.topk = k;
      o.router.aux_coeff = 0.1;
      o.router.z_coeff = 0.01;
      check_layer(o);
      o.router.pre_softmax = true;
      o.router.drop = DropPolicy::probability;
      o.router.capacity_factor = 0.8;
      check_layer(o);
    }
}

TEST(MoeLayer, FaultNamesParse) {
  for (const std::string& n : faults().names()) EXPECT_NE(faults().parse(n), Fault::none) << n;
  EXPECT_EQ(faults().parse(""), Fault::none);
  EXPECT_THROW(faults().parse("nope"), UsageError);
}

}  // namespace
}  // namespace sextant::moe
