// The GPU input generator against the host one (harness/rng.h): the same
// value for the same (seed, tensor, index), rounded to the dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "harness/error.h"
#include "harness/testing/gpu.h"
#include "kernels/ops/random.h"

namespace sextant::ops {
namespace {

// Elements whose bits differ between two tensors of one dtype.
int64_t differing_bits(const Tensor& a, const Tensor& b) {
  const size_t elem = dtype_size(a.dtype());
  auto* pa = static_cast<const unsigned char*>(a.raw());
  auto* pb = static_cast<const unsigned char*>(b.raw());
  int64_t differ = 0;
  for (int64_t i = 0; i < a.numel(); ++i) differ += std::memcmp(pa + i * elem, pb + i * elem, elem) != 0;
  return differ;
}

TEST(CudaRng, UniformBlocksAreBitIdenticalToTheHost) {
  SEXTANT_REQUIRE_GPU();
  const Shape global{3, 40, 6, 16};
  // The whole tensor, a sequence shard, and a head shard at an odd offset.
  const std::vector<std::pair<Shape, Shape>> blocks = {
      {{0, 0, 0, 0}, {3, 40, 6, 16}}, {{0, 10, 0, 0}, {3, 10, 6, 16}}, {{1, 7, 3, 0}, {2, 13, 2, 16}}};
  for (DType d : {DType::f64, DType::f32, DType::bf16, DType::f16})
    for (const auto& [offset, local] : blocks) {
      RandomSpec spec{11, tensor_id("cuda.rng"), 0.75};
      Tensor host = sextant::random_block(global, offset, local, d, spec);
      Tensor gpu = random_block(global, offset, local, d, spec, Device::cuda).to(Device::host);
      EXPECT_EQ(differing_bits(gpu, host), 0)
          << dtype_name(d) << " block " << shape_string(local) << " at " << shape_string(offset);
    }
}

TEST(CudaRng, NormalValuesMatchTheHostAfterRounding) {
  SEXTANT_REQUIRE_GPU();
  const Shape shape{1 << 16};
  RandomSpec spec{5, tensor_id("cuda.rng.normal"), 2.0, Distribution::normal};
  Tensor host64 = sextant::random_tensor(shape, DType::f64, spec);
  Tensor gpu64 = random_tensor(shape, DType::f64, spec, Device::cuda).to(Device::host);
  double worst = 0;
  for (int64_t i = 0; i < host64.numel(); ++i)
    worst = std::max(worst, std::abs(gpu64.at(i) - host64.at(i)) / std::max(std::abs(host64.at(i)), 1e-300));
  EXPECT_LT(worst, 1e-14) << "CUDA's log1p / cos are within a few ulp of glibc's";
  // Rounded to a storage dtype the values agree except at rare rounding boundaries.
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    Tensor host = sextant::random_tensor(shape, d, spec);
    Tensor gpu = random_tensor(shape, d, spec, Device::cuda).to(Device::host);
    EXPECT_LE(differing_bits(gpu, host), 2) << dtype_name(d);
  }
}

TEST(CudaRng, RejectsBlocksOutsideTheTensor) {
  SEXTANT_REQUIRE_GPU();
  EXPECT_THROW(random_block({4, 4}, {2, 0}, {3, 4}, DType::f32, {1, 1}, Device::cuda), RuntimeError);
}

}  // namespace
}  // namespace sextant::ops
