#include "harness/rng.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sextant {
namespace {

TEST(Rng, ShardsEqualTheWholeTensor) {
  RandomSpec spec{7, tensor_id("x"), 0.5};
  Shape global{2, 8, 3, 4};
  Tensor whole = random_tensor(global, DType::f32, spec);
  // A sequence shard and a head shard, generated independently.
  Tensor block = random_block(global, {0, 4, 1, 0}, {2, 2, 2, 4}, DType::f32, spec);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t d = 0; d < 4; ++d) {
          int64_t g = ((b * 8 + (s + 4)) * 3 + (h + 1)) * 4 + d;
          int64_t l = ((b * 2 + s) * 2 + h) * 4 + d;
          ASSERT_EQ(block.at(l), whole.at(g));
        }
}

// A block big enough to be drawn by several threads: every element is the
// value of its global index, whichever thread drew it.
TEST(Rng, LargeBlocksDrawnInParallelMatchTheIndexFormula) {
  RandomSpec spec{11, tensor_id("big"), 1.0};
  const Shape global{3, 1 << 12, 1 << 11}, offset{1, 5, 3}, local{2, 4000, 2000};  // 16e6 elements
  Tensor block = random_block(global, offset, local, DType::f32, spec);
  auto expect_index_value = [&](int64_t i) {
    const int64_t x = i / (local[1] * local[2]), y = i / local[2] % local[1], z = i % local[2];
    const int64_t g = ((x + offset[0]) * global[1] + y + offset[1]) * global[2] + z + offset[2];
    ASSERT_EQ(block.at(i), static_cast<float>(random_value(spec, static_cast<uint64_t>(g)))) << "element " << i;
  };
  for (int64_t i = 0; i < block.numel(); i += 9973) expect_index_value(i);  // a prime stride: every thread's range
  expect_index_value(block.numel() - 1);
}

TEST(Rng, DeterministicDistinctAndInRange) {
  RandomSpec a{1, tensor_id("a")}, b{1, tensor_id("b")}, c{2, tensor_id("a")};
  EXPECT_EQ(random_value(a, 5), random_value(a, 5));
  EXPECT_NE(random_value(a, 5), random_value(b, 5));
  EXPECT_NE(random_value(a, 5), random_value(c, 5));
  double sum = 0, sum2 = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    double v = random_value(a, static_cast<uint64_t>(i));
    ASSERT_GE(v, -1.0);
    ASSERT_LT(v, 1.0);
    sum += v;
    sum2 += v * v;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum2 / n, 1.0 / 3.0, 0.01);  // variance of U(-1, 1)
  RandomSpec normal{3, tensor_id("n"), 2.0, Distribution::normal};
  sum = sum2 = 0;
  for (int i = 0; i < n; ++i) {
    double v = random_value(normal, static_cast<uint64_t>(i));
    sum += v;
    sum2 += v * v;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(std::sqrt(sum2 / n), 2.0, 0.03);
}

TEST(Rng, ValuesAreRoundedToTheDtype) {
  RandomSpec spec{1, tensor_id("r")};
  Tensor t = random_tensor({64}, DType::bf16, spec);
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(t.at(i), round_to(DType::bf16, static_cast<float>(random_value(spec, i))));
}

}  // namespace
}  // namespace sextant
