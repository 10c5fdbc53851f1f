#include "reference/fp8.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "harness/error.h"
#include "reference/f64_tensor.h"

namespace sextant::ref {

namespace {

double to_f32(double x) { return static_cast<float>(x); }

double largest(const Fp8Grid& grid) { return fp8_values(grid).back(); }

// The multiplier that maps a block of largest magnitude `amax` into the format.
double block_scale(double amax, const Fp8Quantization& q) {
  const double fp8_max = largest(q.grid);
  switch (q.rule) {
    case Fp8ScaleRule::given: return q.given_scale;
    case Fp8ScaleRule::amax:
    case Fp8ScaleRule::amax_pow2: {
      if (amax == 0) return 1;
      double scale = std::min(fp8_max / amax, static_cast<double>(FLT_MAX));  // in f32, saturating
      scale = to_f32(scale);
      if (q.rule == Fp8ScaleRule::amax_pow2) {
        int e = 0;
        std::frexp(scale, &e);  // scale = m 2^e, m in [0.5, 1)
        scale = std::ldexp(1.0, e - 1);
      }
      return scale;
    }
    case Fp8ScaleRule::mx_exponent: {
      if (amax == 0) return std::ldexp(1.0, 127);
      const double ratio = to_f32(amax / fp8_max);
      const int e = std::clamp(static_cast<int>(std::ceil(std::log2(ratio))), -126, 127);
      return std::ldexp(1.0, -e);
    }
  }
  throw RuntimeError("fp8_quantize: unknown scale rule");
}

}  // namespace

std::vector<double> fp8_values(const Fp8Grid& grid) {
  const int m = grid.mantissa_bits, bias = grid.bias();
  const int top_field = (1 << grid.exponent_bits) - 1;
  std::vector<double> v;
  for (int k = 0; k < (1 << m); ++k) v.push_back(k * std::ldexp(1.0, 1 - bias - m));  // subnormals (and zero)
  const int last_field = grid.ieee_specials ? top_field - 1 : top_field;
  for (int e = 1; e <= last_field; ++e)
    for (int j = 0; j < (1 << m); ++j) v.push_back((1.0 + std::ldexp(j, -m)) * std::ldexp(1.0, e - bias));
  if (!grid.ieee_specials) v.pop_back();  // S.1111.111 is NaN
  return v;
}

double fp8_cast(double x, const Fp8Grid& grid) {
  if (!std::isfinite(x)) throw RuntimeError("fp8_cast: a non-finite value");
  const std::vector<double> values = fp8_values(grid);
  const double a = std::fabs(x);
  double out = values.back();
  if (a < values.back()) {
    const size_t hi = std::upper_bound(values.begin(), values.end(), a) - values.begin();  // values[hi] > a
    const size_t lo = hi - 1;
    const double below = a - values[lo], above = values[hi] - a;
    out = below < above || (below == above && lo % 2 == 0) ? values[lo] : values[hi];
  }
  return std::copysign(out, x);
}

Fp8Quantized fp8_quantize(const Tensor& x, const Fp8Quantization& q) {
  if (x.ndim() != 2) throw RuntimeError("fp8_quantize: want a matrix, got " + shape_string(x.shape()));
  const Tensor xd = as_f64(x);
  const int64_t rows = x.shape()[0], cols = x.shape()[1];
  const int64_t br = q.block_rows ? q.block_rows : std::max<int64_t>(rows, 1);
  const int64_t bc = q.block_cols ? q.block_cols : std::max<int64_t>(cols, 1);
  const int64_t grid_rows = (rows + br - 1) / br, grid_cols = (cols + bc - 1) / bc;
  const double* px = xd.data<double>();
  auto block_of = [&](int64_t r, int64_t c) { return (r / br) * grid_cols + c / bc; };

  std::vector<double> amax(grid_rows * grid_cols, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      amax[block_of(r, c)] = std::max(amax[block_of(r, c)], std::fabs(px[r * cols + c]));

  Fp8Quantized out;
  out.amax = amax.empty() ? 0.0 : *std::max_element(amax.begin(), amax.end());
  std::vector<double> scale(amax.size());
  for (size_t b = 0; b < amax.size(); ++b) {
    scale[b] = block_scale(amax[b], q);
    // The decode scale as stored: an f32 reciprocal (exact for powers of two).
    out.scale_inv.push_back(to_f32(1.0 / scale[b]));
  }
  out.value = Tensor::empty({rows, cols}, DType::f64);
  double* pv = out.value.data<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t b = block_of(r, c);
      pv[r * cols + c] = to_f32(fp8_cast(to_f32(px[r * cols + c] * scale[b]), q.grid) * out.scale_inv[b]);
    }
  return out;
}

double delayed_scale(const std::vector<double>& amaxes, int history, bool use_max, int margin, double fp8_max) {
  double scale = 1;
  for (size_t t = 0; t < amaxes.size(); ++t) {
    const size_t first = t + 1 > static_cast<size_t>(history) ? t + 1 - history : 0;
    const double used = use_max ? *std::max_element(amaxes.begin() + first, amaxes.begin() + t + 1) : amaxes[t];
    if (used > 0 && std::isfinite(used)) scale = to_f32(to_f32(fp8_max / used) / std::ldexp(1.0, margin));
  }
  return scale;
}

}  // namespace sextant::ref
