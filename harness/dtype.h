// Element types and the host conversions between them.
// bf16 and f16 are stored as raw 16-bit patterns (binary compatible with
// CUDA's __nv_bfloat16 / __half); conversions from float round to nearest even.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sextant {

enum class DType { f64, f32, bf16, f16 };

struct bf16 {
  uint16_t bits = 0;
};
struct f16 {
  uint16_t bits = 0;
};

size_t dtype_size(DType dtype);
std::string dtype_name(DType dtype);        // "f64", "f32", "bf16", "f16"
DType parse_dtype(const std::string& name);  // throws UsageError
// Unit roundoff 2^-p of the storage format (p = significand bits).
double unit_roundoff(DType dtype);

uint16_t float_to_bf16_bits(float x);  // round to nearest even; NaN stays NaN
float bf16_bits_to_float(uint16_t bits);
uint16_t float_to_f16_bits(float x);  // round to nearest even, subnormals, overflow to inf
float f16_bits_to_float(uint16_t bits);

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
constexpr DType dtype_of<double>() { return DType::f64; }
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <>
constexpr DType dtype_of<f16>() { return DType::f16; }

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
