#include "harness/tensor.h"

#include <gtest/gtest.h>

#include "harness/error.h"

namespace sextant {
namespace {

Tensor iota(const Shape& shape, DType dtype = DType::f32) {
  Tensor t = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(i));
  return t;
}

TEST(Tensor, ShapeAndTypedAccess) {
  Tensor t = Tensor::zeros({2, 3, 4}, DType::f32);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_NO_THROW(t.data<float>());
  EXPECT_THROW(t.data<double>(), RuntimeError);
  EXPECT_THROW(t.reshape({5, 5}), RuntimeError);
  Tensor r = t.reshape({6, 4});
  r.set(0, 3.0);
  EXPECT_EQ(t.at(0), 3.0) << "reshape shares storage";
}

TEST(Tensor, ConversionRoundsAndCloneIsDeep) {
  Tensor t = Tensor::from_values({3}, {1.0, 1.0 + 1.0 / 512, -2.5}, DType::f64);
  Tensor b = t.to(DType::bf16);
  EXPECT_EQ(b.at(1), 1.0);  // 1 + 2^-9 rounds to 1 in bf16
  EXPECT_EQ(b.at(2), -2.5);
  Tensor c = t.clone();
  c.set(0, 9.0);
  EXPECT_EQ(t.at(0), 1.0);
}

TEST(Tensor, NarrowConcatWriteSliceAndChunk) {
  Tensor t = iota({2, 6, 3});
  Tensor mid = narrow(t, 1, 2, 3);
  EXPECT_EQ(mid.shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(mid.at(0), 6.0);         // t[0,2,0]
  EXPECT_EQ(mid.at(9), 18.0 + 6.0);  // t[1,2,0]
  Tensor back = concat({narrow(t, 1, 0, 2), mid, narrow(t, 1, 5, 1)}, 1);
  EXPECT_EQ(back.to_vector(), t.to_vector());
  Tensor z = Tensor::zeros({2, 6, 3}, DType::f32);
  write_slice(z, 1, 2, mid);
  EXPECT_EQ(z.at(6), 6.0);
  EXPECT_EQ(z.at(0), 0.0);
  EXPECT_EQ(chunk(t, 1, 3, 1).to_vector(), narrow(t, 1, 2, 2).to_vector());
  EXPECT_THROW(narrow(t, 1, 5, 2), RuntimeError);
  EXPECT_THROW(chunk(t, 1, 4, 0), RuntimeError);
}

TEST(Tensor, CudaTensorWithoutCudaIsAClearError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(Tensor::empty({4}, DType::f32, Device::cuda), std::exception);
}

}  // namespace
}  // namespace sextant
