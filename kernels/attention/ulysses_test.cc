#include "kernels/attention/ulysses.h"

#include <gtest/gtest.h>

#include "harness/error.h"
#include "harness/rng.h"

namespace sextant::cp {
namespace {

TEST(KvReplicas, SplitReplicateOrRefuse) {
  EXPECT_EQ(kv_replicas(4, 8), 1);  // two KV heads per member
  EXPECT_EQ(kv_replicas(4, 4), 1);
  EXPECT_EQ(kv_replicas(8, 2), 4);  // each KV head to four members
  EXPECT_EQ(kv_replicas(4, 1), 4);
  EXPECT_THROW(kv_replicas(8, 6), RuntimeError);
  EXPECT_THROW(kv_replicas(4, 0), RuntimeError);
}

// Copy j of head i sits at i r + j, and the copies' gradients sum back into
// their head (the first copy alone under the planted fault).
TEST(KvReplicas, ReplicateThenSumIsRTimesTheHead) {
  const Tensor x = random_tensor({2, 3, 2, 4}, DType::f32, {5, tensor_id("kv")});  // [b, n, hk, d]
  const Tensor copies = replicate_kv_heads(x, 3);
  ASSERT_EQ(copies.shape(), (Shape{2, 3, 6, 4}));
  for (int64_t bi = 0; bi < 2; ++bi)
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t h = 0; h < 6; ++h)
        for (int64_t e = 0; e < 4; ++e)
          EXPECT_EQ(copies.data<float>()[((bi * 3 + n) * 6 + h) * 4 + e],
                    x.data<float>()[((bi * 3 + n) * 2 + h / 3) * 4 + e]);
  const Tensor sum = sum_kv_replicas(copies, 3), first = sum_kv_replicas(copies, 3, true);
  ASSERT_EQ(sum.shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    EXPECT_FLOAT_EQ(sum.data<float>()[i], 3 * x.data<float>()[i]);
    EXPECT_EQ(first.data<float>()[i], x.data<float>()[i]);
  }
  EXPECT_EQ(replicate_kv_heads(x, 1).raw(), x.raw());  // one copy: the tensor itself
}

}  // namespace
}  // namespace sextant::cp
