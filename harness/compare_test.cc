#include "harness/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace sextant {
namespace {

TEST(Compare, RelativeL2MaxAbsAndNonFinite) {
  Tensor ref = Tensor::from_values({4}, {3, 4, 0, 0}, DType::f64);
  Tensor x = Tensor::from_values({4}, {3, 4, 0.5, 0}, DType::f32);
  ErrorStats s = compare(x, ref);
  EXPECT_DOUBLE_EQ(s.rel_l2, 0.5 / 5.0);
  EXPECT_DOUBLE_EQ(s.max_abs, 0.5);
  EXPECT_EQ(s.nonfinite, 0);
  x.set(3, std::numeric_limits<double>::quiet_NaN());
  s = compare(x, ref);
  EXPECT_EQ(s.nonfinite, 1);
  EXPECT_TRUE(std::isinf(s.rel_l2));
}

}  // namespace
}  // namespace sextant
