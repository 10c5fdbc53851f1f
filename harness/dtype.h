// Element types and the host conversions between them.
// bf16 and f16 are stored as raw 16-bit patterns (binary compatible with
// CUDA's __nv_bfloat16 / __half); conversions from float round to nearest even.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace sextant {

enum class DType { f64, f32, bf16, f16 };

struct bf16 {
  uint16_t bits = 0;
};
struct f16 {
  uint16_t bits = 0;
};

size_t dtype_size(DType dtype);
std::string dtype_name(DType dtype);         // "f64", "f32", "bf16", "f16"
DType parse_dtype(const std::string& name);  // throws UsageError
// Unit roundoff 2^-p of the storage format (p = significand bits).
double unit_roundoff(DType dtype);

// Inline: these sit in the inner loops of 16-bit kernels and of the MPI
// reductions on 16-bit data.
// Round to nearest even; NaN stays NaN.
inline uint16_t float_to_bf16_bits(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);  // ties go to the even neighbour
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

inline float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// Round to nearest even, with subnormals; overflow gives inf.
inline uint16_t float_to_f16_bits(float x) {
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

inline float f16_bits_to_float(uint16_t bits) {
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

inline bf16 to_bf16(float x) { return {float_to_bf16_bits(x)}; }
inline f16 to_f16(float x) { return {float_to_f16_bits(x)}; }
inline float to_float(bf16 x) { return bf16_bits_to_float(x.bits); }
inline float to_float(f16 x) { return f16_bits_to_float(x.bits); }
inline float to_float(float x) { return x; }
inline double to_float(double x) { return x; }

// Rounds a double to the nearest value representable in dtype (through float
// for the 16-bit types, as a kernel storing f32 results would).
double round_to(DType dtype, double x);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<f16>() {
  return DType::f16;
}

// Calls fn(T{}) with T the C++ type of dtype: dispatch(dtype, [&](auto t) { using T = decltype(t); ... }).
template <class Fn>
decltype(auto) dispatch(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f64: return fn(double{});
    case DType::f32: return fn(float{});
    case DType::bf16: return fn(bf16{});
    case DType::f16: return fn(f16{});
  }
  return fn(double{});
}

// Converts any element type to double / from float with rounding.
template <class T>
inline double to_double(T x) {
  return static_cast<double>(to_float(x));
}
template <class T>
inline T from_float(float x) {
  if constexpr (std::is_same_v<T, bf16>) return to_bf16(x);
  else if constexpr (std::is_same_v<T, f16>) return to_f16(x);
  else return static_cast<T>(x);
}
template <class T>
inline T from_double(double x) {
  if constexpr (std::is_same_v<T, double>) return x;
  else return from_float<T>(static_cast<float>(x));
}

}  // namespace sextant
