// The OCP 8-bit floating-point formats (OFP8, "OCP 8-bit Floating Point
// Specification" v1.0) that FP8 training stores its GEMM operands in:
//   E4M3: bias 7, max 448, min normal 2^-6, min subnormal 2^-9, no
//         infinities, NaN = S.1111.111 (torch's float8_e4m3fn);
//   E5M2: bias 15, max 57344, min normal 2^-14, min subnormal 2^-16,
//         IEEE-style infinities and NaNs (torch's float8_e5m2).
// Conversions from float round to nearest even and saturate: a magnitude past
// the largest finite value, infinities included, becomes that value (CUDA's
// __NV_SATFINITE, which FP8 training casts use); NaN stays NaN.
// The E8M0 scale of MX formats (OCP Microscaling Formats v1.0) is a bare
// biased exponent: 2^(code - 127), code 255 is NaN.
#pragma once

#include <cstdint>
#include <string>

namespace sextant::ops {

enum class Fp8Format { e4m3, e5m2 };

struct Fp8FormatInfo {
  Fp8Format format;
  const char* name;  // "e4m3", "e5m2"
  int exponent_bits, mantissa_bits, bias;
  float max;             // largest finite magnitude
  int max_exponent;      // of the largest binade (8 for E4M3, 15 for E5M2): MX's emax_elem
  double unit_roundoff;  // 2^-(mantissa_bits + 1)
};
const Fp8FormatInfo& fp8_info(Fp8Format format);

// Round to nearest even with saturation (see above).
uint8_t fp8_encode(float x, Fp8Format format);
// The value of a code: exact in float (every OFP8 value is).
float fp8_decode(uint8_t code, Fp8Format format);
// Wrap-around instead of saturation: the code a conversion gets when the
// exponent field overflows into the sign-free bits. Only the planted fault
// fp8_saturation_wraps uses it.
uint8_t fp8_encode_wrapping(float x, Fp8Format format);

// E8M0: the power of two 2^e, e in [-127, 127], as its biased code.
uint8_t e8m0_encode(int exponent);
float e8m0_decode(uint8_t code);  // 2^(code - 127); NaN for 255

}  // namespace sextant::ops
