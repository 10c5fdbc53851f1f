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
