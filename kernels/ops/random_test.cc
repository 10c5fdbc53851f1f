#include "kernels/ops/random.h"

#include <gtest/gtest.h>

#include "harness/error.h"

namespace sextant::ops {
namespace {

TEST(Random, HostBlocksAreHarnessBlocks) {
  RandomSpec spec{3, tensor_id("ops.random"), 0.5};
  Tensor ours = random_block({4, 6}, {1, 2}, {2, 3}, DType::bf16, spec, Device::host);
  Tensor harness = sextant::random_block({4, 6}, {1, 2}, {2, 3}, DType::bf16, spec);
  EXPECT_EQ(ours.to_vector(), harness.to_vector());
  EXPECT_EQ(random_tensor({5}, DType::f32, spec, Device::host).to_vector(),
            sextant::random_tensor({5}, DType::f32, spec).to_vector());
}

// Where no GPU can be used, asking for one is a clear usage error, not a crash
// (kernels/ops/cuda/rng_cuda_test.cc checks the GPU values where one exists).
TEST(Random, CudaWithoutAGpuIsAUsageError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible: covered by ops_cuda_test";
  EXPECT_THROW(random_tensor({4}, DType::f32, {1, 1}, Device::cuda), UsageError);
}

}  // namespace
}  // namespace sextant::ops
