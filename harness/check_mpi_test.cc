#include <gtest/gtest.h>

#include "harness/assemble.h"
#include "harness/check.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "harness/testing/mpi_world.h"

namespace sextant {
namespace {

using testing::world;

// Two runs that took other discrete decisions, each exact for its own: with
// a reference per run both pass; held to one reference, the other fails.
TEST(Checker, HoldsEachRunToItsOwnReference) {
  Checker checker(world(), DType::f32);
  if (checker.is_root()) {
    const Tensor ref_dist = random_tensor({64, 64}, DType::f64, {5, tensor_id("check.ref"), 1.0});
    Tensor ref_base = ref_dist.clone();
    ref_base.set(7, ref_base.at(7) + 1.0);  // the one element the two decisions change
    const Tensor dist = ref_dist.to(DType::f32), base = ref_base.to(DType::f32);
    checker.compare("own references", OpClass::linear, dist, base, ref_dist, ref_base, 1.0);
    checker.compare("one reference", OpClass::linear, dist, base, ref_base);
  }
  const Conformance result = checker.finish();
  if (!checker.is_root()) return;
  ASSERT_EQ(result.tensors.size(), 2u);
  EXPECT_TRUE(result.tensors[0].pass);
  EXPECT_LT(result.tensors[0].error, 1e-7);
  EXPECT_TRUE(result.tensors[0].systematic.estimated);
  EXPECT_FALSE(result.tensors[1].pass);
  EXPECT_EQ(result.tensors[1].failed_side(), "distributed");
}

// A tensor assembled from the ranks' blocks, one rank's block wrong: the
// failure names that rank, with how many of its elements are off.
TEST(Checker, NamesTheRankThatOwnsTheWrongElements) {
  MpiCommunicator& c = world();
  if (c.size() < 2) GTEST_SKIP() << "needs two ranks";
  const int n = c.size(), bad = n - 1;
  const Shape global{4 * n, 8};
  const RandomSpec spec{9, tensor_id("check.owned"), 1.0};
  Tensor mine = random_block(global, {4 * c.rank(), 0}, {4, 8}, DType::f32, spec);
  if (c.rank() == bad) mine.set(5, mine.at(5) + 1.0);  // one element of the last rank's block
  Assembled a = assemble(c, {block_along(mine, 0, 4 * c.rank())}, global, DType::f32);
  Checker checker(c, DType::f32);
  if (checker.is_root()) {
    const Tensor ref = random_tensor(global, DType::f64, spec);
    checker.compare("owned", OpClass::linear, a.tensor, ref.to(DType::f32), ref);
  }
  const Conformance result = checker.finish();
  if (!checker.is_root()) return;
  ASSERT_EQ(result.tensors.size(), 1u);
  const TensorCheck& t = result.tensors[0];
  EXPECT_FALSE(t.pass);
  ASSERT_EQ(t.off_by_rank.size(), 1u);
  EXPECT_EQ(t.off_by_rank[0].rank, bad);
  EXPECT_EQ(t.off_by_rank[0].off, 1);
  EXPECT_EQ(t.off_by_rank[0].owned, 32);
  EXPECT_NE(result.failures.front().find(cat("rank ", bad, " 1 of 32")), std::string::npos) << result.failures.front();
}

}  // namespace
}  // namespace sextant
