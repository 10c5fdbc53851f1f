// exp for element-wise loops, one arithmetic for a scalar float (in loops the
// compiler auto-vectorizes) and for the lane vectors of simd.h, so both give
// the same results (bitwise, when compiled for the same ISA level). Cephes'
// expf written branch-free: e^x = 2^n e^r, n = round(x log2 e), r = x - n ln2
// (ln2 split in two so that n * ln2_hi is exact), e^r by a degree-7
// polynomial, 2^n built in the exponent bits.
//
// Accuracy: within 2 ulp of e^x where the result is a normal float (x >=
// -87.33; simd_test.cc); subnormal down to x = -87.68 (n = -126), and 0 below,
// where n = -127 gives a zero exponent field (so e^-inf = 0). x is clamped to
// +-127 ln2, so above 88.03 the result saturates near 2.4e38 instead of inf.
// NaN stays NaN.
//
// The scalar form vectorizes only under -fno-trapping-math (set for
// sextant_ops in kernels/ops/CMakeLists.txt): GCC threads the clamps into
// branches and will not if-convert them otherwise. The vector forms need no flag.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ops/simd.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace sextant::ops {

// V = float with I = int32_t, or V = f32v<L> with I = i32v<L>.
template <class V, class I>
SEXTANT_ALWAYS_INLINE V exp_f32(V x) {
  constexpr float kClamp = 88.02969193f;  // 127 ln 2
  V c = x < -kClamp ? V{} - kClamp : x;   // NaN fails both tests and stays NaN
  c = c > kClamp ? V{} + kClamp : c;
  // round(c log2 e) by adding 1.5 * 2^23: the integer lands in the low
  // mantissa bits of `shifted`, so no float-to-int conversion is needed.
  constexpr float kRound = 12582912.0f;
  const V shifted = c * 1.44269504088896341f + kRound;
  const V n = shifted - kRound;
  V r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  V p = V{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const V exp_r = p * r * r + r + 1.0f;
  const I biased_exponent = __builtin_bit_cast(I, shifted) - 0x4B400000 + 127;  // n + 127
  return exp_r * __builtin_bit_cast(V, biased_exponent << 23);
}

SEXTANT_ALWAYS_INLINE float vexp(float x) { return exp_f32<float, int32_t>(x); }
SEXTANT_ALWAYS_INLINE f32v<4> vexp(f32v<4> x) { return exp_f32<f32v<4>, i32v<4>>(x); }
SEXTANT_ALWAYS_INLINE f32v<8> vexp(f32v<8> x) { return exp_f32<f32v<8>, i32v<8>>(x); }
SEXTANT_ALWAYS_INLINE f32v<16> vexp(f32v<16> x) { return exp_f32<f32v<16>, i32v<16>>(x); }
// f64 compute (f64 storage) keeps libm: that path is for checks, not speed.
inline double vexp(double x) { return std::exp(x); }

}  // namespace sextant::ops

#pragma GCC diagnostic pop
