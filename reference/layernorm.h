// LayerNorm over the last dimension, float64:
//   mean = (1/h) sum_j x_j,  var = (1/h) sum_j (x_j - mean)^2,
//   xhat = (x - mean) / sqrt(var + eps),  y = xhat * gamma + beta.
#pragma once

#include "harness/tensor.h"

namespace sextant::ref {

struct LayerNormOut {
  Tensor y;     // [..., h]
  Tensor mean;  // [rows]
  Tensor rstd;  // [rows]  1 / sqrt(var + eps)
};
// x: [..., h]; gamma, beta: [h].
LayerNormOut layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5);

struct LayerNormGrads {
  Tensor dx;      // [..., h]
  Tensor dgamma;  // [h]
  Tensor dbeta;   // [h]
};
// dy, x: [..., h]; gamma: [h]. Recomputes the statistics from x.
LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, double eps = 1e-5);

}  // namespace sextant::ref
