#include "harness/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "harness/error.h"

namespace sextant {
namespace {

// Slow, obviously-correct rounding of a float to `mantissa_bits` bits with
// round-to-nearest-even, min normal exponent `emin` and max finite `max_finite`.
double round_reference(double x, int mantissa_bits, int emin, double max_finite) {
  if (std::isnan(x) || x == 0) return x;
  double a = std::fabs(x);
  int e = std::max(static_cast<int>(std::floor(std::log2(a))), emin);
  double quantum = std::ldexp(1.0, e - mantissa_bits);
  double r = std::nearbyint(a / quantum) * quantum;  // default mode: ties to even
  double half_ulp_above_max =
      max_finite + std::ldexp(1.0, static_cast<int>(std::floor(std::log2(max_finite))) - mantissa_bits - 1);
  if (a >= half_ulp_above_max) r = std::numeric_limits<double>::infinity();
  return std::copysign(r, x);
}

TEST(DType, F16RoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    float f = f16_bits_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(f))));
      continue;
    }
    EXPECT_EQ(float_to_f16_bits(f), bits) << "pattern " << b;
  }
}

TEST(DType, Bf16RoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    float f = bf16_bits_to_float(bits);
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_bf16_bits(f), bits) << "pattern " << b;
  }
}

TEST(DType, F16RoundsToNearestEvenIncludingSubnormals) {
  // Midpoints between neighbours, and random floats, against the slow reference.
  for (uint32_t b = 0; b < 0x7bff; ++b) {
    double lo = f16_bits_to_float(static_cast<uint16_t>(b));
    double hi = f16_bits_to_float(static_cast<uint16_t>(b + 1));
    float mid = static_cast<float>((lo + hi) / 2);
    double want = round_reference(mid, 10, -14, 65504.0);
    EXPECT_EQ(static_cast<double>(f16_bits_to_float(float_to_f16_bits(mid))), want) << "between " << lo << " " << hi;
    EXPECT_EQ(float_to_f16_bits(mid) & 1, 0) << "tie must go to even at " << mid;
  }
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    float x = std::bit_cast<float>((state & 0x807fffffu) | ((state >> 8 & 0x1f) + 100) << 23);
    double want = round_reference(x, 10, -14, 65504.0);
    EXPECT_EQ(static_cast<double>(f16_bits_to_float(float_to_f16_bits(x))), want) << x;
  }
  EXPECT_TRUE(std::isinf(f16_bits_to_float(float_to_f16_bits(65520.0f))));
  EXPECT_EQ(f16_bits_to_float(float_to_f16_bits(65519.0f)), 65504.0f);
}

TEST(DType, Bf16RoundsToNearestEven) {
  uint32_t state = 777;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    float x = std::bit_cast<float>((state & 0x807fffffu) | ((state >> 8 & 0x3f) + 100) << 23);
    double want = round_reference(x, 7, -126, 3.3895313892515355e38);
    EXPECT_EQ(static_cast<double>(bf16_bits_to_float(float_to_bf16_bits(x))), want) << x;
  }
  // 1 + 2^-8 is the midpoint between 1 and 1 + 2^-7: ties to 1 (even).
  EXPECT_EQ(bf16_bits_to_float(float_to_bf16_bits(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(bf16_bits_to_float(float_to_bf16_bits(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, NamesParseAndSizes) {
  for (DType d : {DType::f64, DType::f32, DType::bf16, DType::f16}) EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_THROW(parse_dtype("fp8"), UsageError);
  EXPECT_EQ(round_to(DType::bf16, 1.0 + 1.0 / 1024), 1.0);
}

}  // namespace
}  // namespace sextant
