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

Tensor ones(int64_t n) {
  return Tensor::from_values({n}, std::vector<double>(static_cast<size_t>(n), 1.0), DType::f64);
}

// x = y (1 + c) plus rounding-like noise: the scale comes out as c, its
// standard error as the noise over sqrt(n); pure noise stays within a few
// standard errors of zero.
TEST(Systematic, FindsAScaleErrorFarBelowTheNoiseOfEachElement) {
  const int64_t n = 1 << 16;
  Tensor ref = Tensor::empty({n}, DType::f64), y = Tensor::empty({n}, DType::f64), x = Tensor::empty({n}, DType::f64);
  uint64_t state = 7;
  auto uniform = [&] {  // splitmix64 in [-1, 1)
    state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-52 - 1.0;
  };
  for (int64_t i = 0; i < n; ++i) {
    const double r = uniform();
    ref.set(i, r);
    y.set(i, r * (1 + 4e-3 * uniform()));               // bf16-sized rounding noise
    x.set(i, r * (1 + 4e-3 * uniform()) * (1 + 1e-3));  // the same noise level, scaled by 1e-3
  }
  const Systematic s = systematic_difference(x, y, ref, 64, 1024);
  ASSERT_TRUE(s.estimated);
  EXPECT_NEAR(s.scale, 1e-3, 1e-4);
  EXPECT_GT(s.scale_se, 0.0);
  EXPECT_LT(s.scale_se, 4e-5);
  EXPECT_GT(s.scale / s.scale_se, 20.0);
  EXPECT_NEAR(scale_against(x, ref), 1e-3, 1e-4);
  const Systematic noise = systematic_difference(y, y, ref, 64, 1024);
  EXPECT_EQ(noise.scale, 0.0);
  EXPECT_EQ(noise.scale_se, 0.0);
  Tensor y2 = Tensor::empty({n}, DType::f64);
  for (int64_t i = 0; i < n; ++i) y2.set(i, ref.at(i) * (1 + 4e-3 * uniform()));
  const Systematic pure = systematic_difference(y2, y, ref, 64, 1024);
  EXPECT_LT(std::abs(pure.scale), 5 * pure.scale_se);
  EXPECT_LT(std::abs(pure.offset), 5 * pure.offset_se);
}

// Noise shared by a row (one error per row of 64, as a row's LSE or
// LayerNorm statistics give) is counted: the groups hold whole rows.
TEST(Systematic, NoiseSharedWithinRowsWidensTheStandardError) {
  const int64_t rows = 1024, width = 64, n = rows * width;
  Tensor ref = ones(n), x = Tensor::empty({n}, DType::f64);
  Tensor independent = Tensor::empty({n}, DType::f64);
  for (int64_t i = 0; i < n; ++i) {
    const double row_noise = ((i / width) % 7 - 3) * 1e-3, element_noise = ((i * 2654435761u) % 7 - 3.0) * 1e-3;
    x.set(i, 1.0 + row_noise);
    independent.set(i, 1.0 + element_noise);
  }
  const Systematic shared = systematic_difference(x, ref, ref, 64, 1024);
  const Systematic apart = systematic_difference(independent, ref, ref, 64, 1024);
  ASSERT_TRUE(shared.estimated && apart.estimated);
  EXPECT_GT(shared.scale_se, 3 * apart.scale_se);
}

TEST(Systematic, SmallOrZeroReferencesAreNotEstimated) {
  const Tensor small = ones(100);
  EXPECT_FALSE(systematic_difference(small, small, small, 64, 1024).estimated);
  const Tensor zero = Tensor::zeros({4096}, DType::f64), one = ones(4096);
  EXPECT_FALSE(systematic_difference(one, one, zero, 64, 1024).estimated);
}

}  // namespace
}  // namespace sextant
