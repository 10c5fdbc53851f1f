#include "kernels/attention/permute.h"

#include <gtest/gtest.h>

#include "harness/error.h"

namespace sextant::cp {
namespace {

Tensor iota(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(i));
  return t;
}

TEST(Permute, MovesLeadingDimsAndKeepsRowsWhole) {
  // x [2, 3, 2] viewed as [a=2, b=3, row=2] -> [b, a, row]
  Tensor y = permute_rows(iota({2, 3, 2}), {2, 3, 2}, {1, 0, 2});
  EXPECT_EQ(y.shape(), (Shape{3, 2, 2}));
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t e = 0; e < 2; ++e) EXPECT_EQ(y.at((b * 2 + a) * 2 + e), (a * 3 + b) * 2 + e);
}

TEST(Permute, InverseOrdersRoundTrip) {
  Tensor x = iota({2, 3, 4, 5, 2});
  Tensor y = permute_rows(x, {2, 3, 4, 5, 2}, {2, 0, 1, 3, 4});  // [4, 2, 3, 5, 2]
  Tensor back = permute_rows(y, y.shape(), {1, 2, 0, 3, 4});
  EXPECT_EQ(back.shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(back.at(i), x.at(i));
}

TEST(Permute, RejectsMovingTheLastDim) {
  EXPECT_THROW(permute_rows(iota({2, 3}), {2, 3}, {1, 0}), RuntimeError);
  EXPECT_THROW(permute_rows(iota({2, 3}), {2, 2}, {0, 1}), RuntimeError);
}

}  // namespace
}  // namespace sextant::cp
