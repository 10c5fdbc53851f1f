#include <gtest/gtest.h>

#include "harness/check.h"
#include "harness/rng.h"
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

}  // namespace
}  // namespace sextant
