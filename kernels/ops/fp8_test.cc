#include "kernels/ops/fp8.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "harness/error.h"

namespace sextant::ops {
namespace {

#include "kernels/ops/fp8_codes_table.inc"

const uint32_t* table(Fp8Format f) { return f == Fp8Format::e4m3 ? kE4m3Values : kE5m2Values; }
float table_value(Fp8Format f, int code) { return std::bit_cast<float>(table(f)[code]); }

constexpr Fp8Format kFormats[] = {Fp8Format::e4m3, Fp8Format::e5m2};

// The conversion by its definition, from the table alone: the finite code
// nearest to x, ties to the code with an even mantissa (its last bit 0),
// magnitudes past the largest finite value saturate to it.
uint8_t nearest_code(float x, Fp8Format f) {
  const double a = std::fabs(static_cast<double>(x));
  int best = 0, largest = 0;
  for (int code = 1; code < 128; ++code)
    if (std::isfinite(table_value(f, code))) largest = code;
  // Saturation first: far past the range the distances below lose their
  // low bits in double and would tie.
  if (a >= table_value(f, largest)) return static_cast<uint8_t>(largest | (std::signbit(x) ? 0x80 : 0));
  for (int code = 1; code < 128; ++code) {
    const double v = table_value(f, code);
    if (!std::isfinite(v)) continue;
    const double d = std::fabs(v - a), best_d = std::fabs(table_value(f, best) - a);
    if (d < best_d || (d == best_d && (code & 1) == 0)) best = code;
  }
  const bool negative = std::signbit(x);
  return static_cast<uint8_t>(best | (negative ? 0x80 : 0));
}

TEST(Fp8, EveryCodeDecodesToTheTableValue) {
  for (Fp8Format f : kFormats)
    for (int code = 0; code < 256; ++code) {
      SCOPED_TRACE(std::string(fp8_info(f).name) + " code " + std::to_string(code));
      const float expected = table_value(f, code), got = fp8_decode(static_cast<uint8_t>(code), f);
      if (std::isnan(expected)) EXPECT_TRUE(std::isnan(got));
      else EXPECT_EQ(std::bit_cast<uint32_t>(got), table(f)[code]);
    }
}

TEST(Fp8, TheFormatsHaveTheSpecifiedRange) {
  const Fp8FormatInfo& e4 = fp8_info(Fp8Format::e4m3);
  const Fp8FormatInfo& e5 = fp8_info(Fp8Format::e5m2);
  EXPECT_EQ(fp8_decode(0x7e, Fp8Format::e4m3), 448.0f);
  EXPECT_EQ(fp8_decode(0x01, Fp8Format::e4m3), 0x1p-9f);
  EXPECT_EQ(fp8_decode(0x08, Fp8Format::e4m3), 0x1p-6f);
  EXPECT_TRUE(std::isnan(fp8_decode(0x7f, Fp8Format::e4m3)));
  EXPECT_EQ(fp8_decode(0x7b, Fp8Format::e5m2), 57344.0f);
  EXPECT_EQ(fp8_decode(0x01, Fp8Format::e5m2), 0x1p-16f);
  EXPECT_EQ(fp8_decode(0x04, Fp8Format::e5m2), 0x1p-14f);
  EXPECT_EQ(fp8_decode(0x7c, Fp8Format::e5m2), std::numeric_limits<float>::infinity());
  EXPECT_EQ(e4.max, 448.0f);
  EXPECT_EQ(e5.max, 57344.0f);
  EXPECT_EQ(e4.unit_roundoff, 0x1p-4);
  EXPECT_EQ(e5.unit_roundoff, 0x1p-3);
}

TEST(Fp8, EveryFiniteCodeRoundTrips) {
  for (Fp8Format f : kFormats)
    for (int code = 0; code < 256; ++code) {
      const float v = table_value(f, code);
      if (std::isfinite(v)) {
        EXPECT_EQ(fp8_encode(v, f), code) << fp8_info(f).name << " code " << code;
      }
    }
}

// Every f32 binade, subnormals included, at mantissas that land on grid
// points, between them and on their ties; and every midpoint between two
// neighbouring codes with the floats just either side of it.
TEST(Fp8, EncodeRoundsToNearestEvenAcrossEveryF32ExponentRange) {
  const uint32_t mantissas[] = {0,        1,        0x000fff, 0x100000, 0x200000, 0x2fffff, 0x300000, 0x400000,
                                0x400001, 0x4fffff, 0x500000, 0x600000, 0x6fffff, 0x700000, 0x7fffff};
  for (Fp8Format f : kFormats) {
    int64_t checked = 0;
    for (uint32_t exponent = 0; exponent < 255; ++exponent)
      for (uint32_t m : mantissas)
        for (uint32_t sign : {0u, 0x80000000u}) {
          const float x = std::bit_cast<float>(sign | (exponent << 23) | m);
          ASSERT_EQ(fp8_encode(x, f), nearest_code(x, f)) << fp8_info(f).name << " x = " << x;
          ++checked;
        }
    for (int code = 0; code + 1 < 128; ++code) {
      const float lo = table_value(f, code), hi = table_value(f, code + 1);
      if (!std::isfinite(hi)) continue;
      const float mid = 0.5f * (lo + hi);  // exact: both have 4 significant bits at most
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, hi), -mid}) {
        ASSERT_EQ(fp8_encode(x, f), nearest_code(x, f)) << fp8_info(f).name << " x = " << x;
        ++checked;
      }
    }
    EXPECT_GT(checked, 7000);
  }
}

TEST(Fp8, PastTheLargestValueSaturatesAndNanStaysNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fp8_encode(448.0f, Fp8Format::e4m3), 0x7e);
  EXPECT_EQ(fp8_encode(470.0f, Fp8Format::e4m3), 0x7e);  // nearest even would be 480, the NaN code
  EXPECT_EQ(fp8_encode(1e30f, Fp8Format::e4m3), 0x7e);
  EXPECT_EQ(fp8_encode(inf, Fp8Format::e4m3), 0x7e);
  EXPECT_EQ(fp8_encode(-inf, Fp8Format::e4m3), 0xfe);
  EXPECT_EQ(fp8_encode(61440.0f, Fp8Format::e5m2), 0x7b);  // would round to infinity
  EXPECT_EQ(fp8_encode(inf, Fp8Format::e5m2), 0x7b);
  EXPECT_EQ(fp8_encode(-1e38f, Fp8Format::e5m2), 0xfb);
  for (Fp8Format f : kFormats)
    EXPECT_TRUE(std::isnan(fp8_decode(fp8_encode(std::numeric_limits<float>::quiet_NaN(), f), f)));
  EXPECT_EQ(fp8_encode(0x1p-11f, Fp8Format::e4m3), 0x00);  // a quarter of the smallest subnormal: zero
  EXPECT_EQ(fp8_encode(0x1p-10f, Fp8Format::e4m3), 0x00);  // half of it: a tie, to the even zero
  EXPECT_EQ(fp8_encode(0x1.8p-10f, Fp8Format::e4m3), 0x01);
}

TEST(Fp8, WrappingDiffersFromSaturationOnlyPastTheRange) {
  for (Fp8Format f : kFormats)
    for (int code = 0; code < 256; ++code) {
      const float v = table_value(f, code);
      if (std::isfinite(v)) {
        EXPECT_EQ(fp8_encode_wrapping(v, f), code);
      }
    }
  EXPECT_EQ(fp8_decode(fp8_encode_wrapping(512.0f, Fp8Format::e4m3), Fp8Format::e4m3), 0.0f);
  EXPECT_NE(fp8_encode_wrapping(1000.0f, Fp8Format::e4m3), fp8_encode(1000.0f, Fp8Format::e4m3));
  EXPECT_NE(fp8_encode_wrapping(70000.0f, Fp8Format::e5m2), fp8_encode(70000.0f, Fp8Format::e5m2));
}

TEST(Fp8, E8m0IsABiasedExponent) {
  EXPECT_EQ(e8m0_decode(127), 1.0f);
  EXPECT_EQ(e8m0_decode(e8m0_encode(-3)), 0.125f);
  EXPECT_EQ(e8m0_decode(0), 0x1p-127f);
  EXPECT_EQ(e8m0_decode(254), 0x1p127f);
  EXPECT_TRUE(std::isnan(e8m0_decode(255)));
  EXPECT_THROW(e8m0_encode(128), RuntimeError);
  EXPECT_THROW(e8m0_encode(-128), RuntimeError);
}

}  // namespace
}  // namespace sextant::ops
