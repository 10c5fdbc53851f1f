#include "kernels/ops/fp8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "harness/error.h"

namespace sextant::ops {

namespace {

const Fp8FormatInfo kFormats[] = {
    {Fp8Format::e4m3, "e4m3", 4, 3, 7, 448.0f, 8, 0x1p-4},
    {Fp8Format::e5m2, "e5m2", 5, 2, 15, 57344.0f, 15, 0x1p-3},
};

// The code of the largest finite magnitude: max_exponent's field, mantissa 1.75.
uint8_t max_code(const Fp8FormatInfo& f) {
  return static_cast<uint8_t>(((f.max_exponent + f.bias) << f.mantissa_bits) | ((3 << (f.mantissa_bits - 2)) & 0xff));
}

// The code of a finite magnitude a >= 0 rounded to nearest even on the
// format's grid, without range handling: past the largest binade the
// exponent field keeps growing. Within a binade 2^e the grid step is
// 2^(e - mantissa_bits); below the smallest normal binade the step stays that
// of the smallest one (subnormals). Counting steps from the bottom of the
// binade above the subnormals makes carries into the next binade, and from
// subnormals into normals, fall out of the integer addition.
uint32_t magnitude_code(float a, const Fp8FormatInfo& f) {
  if (a == 0) return 0;
  int e = 0;
  std::frexp(a, &e);                                 // a = m 2^e, m in [0.5, 1)
  const int exponent = std::max(e - 1, 1 - f.bias);  // a in [2^exponent, 2^(exponent + 1)) or subnormal
  const float step = std::ldexp(1.0f, exponent - f.mantissa_bits);
  const auto steps = static_cast<uint32_t>(std::nearbyint(a / step));  // exact quotient; ties to even
  return (static_cast<uint32_t>(exponent + f.bias - 1) << f.mantissa_bits) + steps;
}

}  // namespace

const Fp8FormatInfo& fp8_info(Fp8Format format) { return kFormats[format == Fp8Format::e4m3 ? 0 : 1]; }

uint8_t fp8_encode(float x, Fp8Format format) {
  const Fp8FormatInfo& f = fp8_info(format);
  const auto sign = static_cast<uint8_t>((std::bit_cast<uint32_t>(x) >> 24) & 0x80u);
  if (std::isnan(x)) return sign | 0x7f;
  const float a = std::fabs(x);
  // Below the largest finite value nothing rounds past it (the next grid
  // point up is the top code, NaN or infinity); at or past it: saturate.
  if (!(a < f.max)) return sign | max_code(f);
  return static_cast<uint8_t>(sign | magnitude_code(a, f));
}

uint8_t fp8_encode_wrapping(float x, Fp8Format format) {
  const Fp8FormatInfo& f = fp8_info(format);
  const auto sign = static_cast<uint8_t>((std::bit_cast<uint32_t>(x) >> 24) & 0x80u);
  if (std::isnan(x)) return sign | 0x7f;
  const float a = std::min(std::fabs(x), 0x1p60f);
  return static_cast<uint8_t>(sign | (magnitude_code(a, f) & 0x7fu));
}

float fp8_decode(uint8_t code, Fp8Format format) {
  const Fp8FormatInfo& f = fp8_info(format);
  const int field = (code & 0x7f) >> f.mantissa_bits;
  const int mantissa = code & ((1 << f.mantissa_bits) - 1);
  const int top_field = (1 << f.exponent_bits) - 1;
  float magnitude;
  if (format == Fp8Format::e4m3 && field == top_field && mantissa == (1 << f.mantissa_bits) - 1)
    magnitude = std::numeric_limits<float>::quiet_NaN();
  else if (format == Fp8Format::e5m2 && field == top_field)
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  else if (field == 0) magnitude = std::ldexp(static_cast<float>(mantissa), 1 - f.bias - f.mantissa_bits);
  else magnitude = std::ldexp(static_cast<float>((1 << f.mantissa_bits) | mantissa), field - f.bias - f.mantissa_bits);
  return (code & 0x80) ? -magnitude : magnitude;
}

uint8_t e8m0_encode(int exponent) {
  if (exponent < -127 || exponent > 127)
    throw RuntimeError("E8M0 scale 2^" + std::to_string(exponent) + " is outside 2^-127 .. 2^127");
  return static_cast<uint8_t>(exponent + 127);
}

float e8m0_decode(uint8_t code) {
  return code == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, static_cast<int>(code) - 127);
}

}  // namespace sextant::ops
