#include "harness/assemble.h"

#include <gtest/gtest.h>

#include "harness/rng.h"
#include "harness/testing/mpi_world.h"

namespace sextant {
namespace {

using testing::world;

TEST(Assemble, ShardsAlongTwoDimsAndReplicas) {
  MpiCommunicator& c = world();
  const int n = c.size(), r = c.rank();
  RandomSpec spec{3, tensor_id("w")};
  Shape global{2, 4 * n, 3};
  // Each rank holds sequence chunk r, plus a replica of chunk 0 (like DP).
  std::vector<Block> blocks{{random_block(global, {0, 4 * r, 0}, {2, 4, 3}, DType::f32, spec), {0, 4 * r, 0}},
                            {random_block(global, {0, 0, 0}, {2, 4, 3}, DType::f32, spec), {0, 0, 0}}};
  Assembled a = assemble(c, blocks, global, DType::f32);
  if (r == 0) {
    EXPECT_EQ(a.tensor.to_vector(), random_tensor(global, DType::f32, spec).to_vector());
    EXPECT_EQ(a.uncovered, 0);
    EXPECT_EQ(a.mismatched, 0);
  } else {
    EXPECT_FALSE(a.tensor.defined());
  }
}

TEST(Assemble, CountsDivergentReplicasAndGaps) {
  MpiCommunicator& c = world();
  if (c.size() < 2) GTEST_SKIP() << "needs two ranks";
  Tensor mine = Tensor::from_values({2}, {1.0, c.rank() == 1 ? 5.0 : 2.0}, DType::f32);
  Assembled a = assemble(c, {{mine, {0}}}, {3}, DType::f32);
  if (c.rank() == 0) {
    EXPECT_EQ(a.mismatched, 1) << "rank 1's replica differs in one element";
    EXPECT_EQ(a.uncovered, 1) << "element 2 was provided by nobody";
  }
}

}  // namespace
}  // namespace sextant
