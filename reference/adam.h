// Adam with bias correction and decoupled weight decay (AdamW), float64,
// one step t >= 1:
//   p <- p (1 - lr wd)
//   m <- beta1 m + (1 - beta1) g,      v <- beta2 v + (1 - beta2) g^2
//   mhat = m / (1 - beta1^t),          vhat = v / (1 - beta2^t)
//   p <- p - lr mhat / (sqrt(vhat) + eps)
#pragma once

#include <cstdint>

#include "harness/tensor.h"

namespace sextant::ref {

struct AdamConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// param, m, v: f64 tensors of one shape, updated in place; grad: same shape, any dtype.
void adam_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, int64_t step, const AdamConfig& config);

}  // namespace sextant::ref
