#include "harness/dtype.h"

#include <bit>
#include <cmath>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f64: return 8;
    case DType::f32: return 4;
    case DType::bf16:
    case DType::f16: return 2;
  }
  return 0;
}

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  for (DType d : {DType::f64, DType::f32, DType::bf16, DType::f16})
    if (dtype_name(d) == name) return d;
  throw UsageError(cat("--dtype '", name, "' must be one of f64, f32, bf16, f16"));
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::f64: return std::ldexp(1.0, -53);
    case DType::f32: return std::ldexp(1.0, -24);
    case DType::bf16: return std::ldexp(1.0, -8);
    case DType::f16: return std::ldexp(1.0, -11);
  }
  return 0;
}

uint16_t float_to_bf16_bits(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);  // ties go to the even neighbour
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_f16_bits(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  uint16_t out;
  if (u >= 0x47800000u) {  // |x| >= 2^16 (or inf/nan): inf, or NaN kept quiet
    out = (u > 0x7f800000u) ? 0x7e00 : 0x7c00;
  } else if (u < 0x38800000u) {  // below 2^-14: subnormal half or zero
    // Adding 0.5 aligns the 10 half mantissa bits at the bottom of the float
    // mantissa; float addition (round to nearest even) performs the rounding.
    float shifted = std::bit_cast<float>(u) + 0.5f;
    out = static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - 0x3f000000u);
  } else {
    uint32_t mantissa_odd = (u >> 13) & 1u;
    u += 0xc8000fffu + mantissa_odd;  // rebias exponent (127 -> 15) and round to even
    out = static_cast<uint16_t>(u >> 13);
  }
  return static_cast<uint16_t>(out | sign);
}

float f16_bits_to_float(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal or zero
  } else if (exponent == 31) {
    magnitude = std::bit_cast<float>(0x7f800000u | (mantissa << 13));  // inf or NaN
  } else {
    magnitude = std::bit_cast<float>(((exponent + 112u) << 23) | (mantissa << 13));
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
}

double round_to(DType dtype, double x) {
  switch (dtype) {
    case DType::f64: return x;
    case DType::f32: return static_cast<float>(x);
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(x)));
    case DType::f16: return f16_bits_to_float(float_to_f16_bits(static_cast<float>(x)));
  }
  return x;
}

}  // namespace sextant
