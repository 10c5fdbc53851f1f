// FP8 quantization, float64: what an FP8 operand's values must be, derived
// from the OCP 8-bit floating-point specification (v1.0) and the scaling
// recipes' definitions, without the kernels' bit manipulation.
//   values   the finite magnitudes of a format, from the spec's formula
//            (subnormals k 2^(1 - bias - m), normals (1 + j / 2^m) 2^(e - bias),
//            less the codes the format reserves for NaN and infinity);
//   cast     the nearest value, ties to the one whose code is even, and
//            magnitudes past the largest finite value saturate to it;
//   scale    per block: fp8_max / amax (power of two if asked), or, for MX,
//            2^-ceil(log2(amax / fp8_max)); the kernels compute scales in
//            f32, so the reference rounds each quotient to f32 once (the
//            f64 quotient rounded to f32 equals the f32 quotient).
#pragma once

#include <cstdint>
#include <vector>

#include "harness/tensor.h"

namespace sextant::ref {

struct Fp8Grid {
  int exponent_bits, mantissa_bits;
  bool ieee_specials;  // the top exponent field holds infinities and NaNs (E5M2); else only S.1111.111 is NaN (E4M3)
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
};
inline constexpr Fp8Grid kE4m3Grid{4, 3, false};
inline constexpr Fp8Grid kE5m2Grid{5, 2, true};

// Every finite non-negative value, ascending: entry i is the value of
// magnitude code i.
std::vector<double> fp8_values(const Fp8Grid& grid);
// Round to nearest even with saturation; x must be finite.
double fp8_cast(double x, const Fp8Grid& grid);

// How one operand's blocks get their scale (the multiplier before the cast).
enum class Fp8ScaleRule {
  given,       // one scale for the whole tensor, from outside (delayed scaling's history)
  amax,        // fp8_max / amax in f32; 1 where amax is 0
  amax_pow2,   // the same rounded down to a power of two
  mx_exponent  // 2^-e, e = ceil(log2(f32(amax / fp8_max))) within [-127, 127]
};
struct Fp8Quantization {
  Fp8Grid grid;
  int64_t block_rows = 0, block_cols = 0;  // 0: the whole extent
  Fp8ScaleRule rule = Fp8ScaleRule::amax;
  double given_scale = 1;
};
struct Fp8Quantized {
  Tensor value;                   // f64 [rows, cols]: cast(f32(x scale)) f32(1 / scale), rounded to f32 as stored
  std::vector<double> scale_inv;  // per block, row-major over the block grid
  double amax = 0;                // of the whole unquantized tensor
};
// x: [rows, cols], any dtype on the host.
Fp8Quantized fp8_quantize(const Tensor& x, const Fp8Quantization& q);

// Delayed scaling's scale for the next step: amaxes of the steps so far,
// oldest first; the last `history` of them, their max or the most recent,
// give f32(fp8_max / amax) / 2^margin; 1 before the first step.
double delayed_scale(const std::vector<double>& amaxes, int history, bool use_max, int margin, double fp8_max);

}  // namespace sextant::ref
