// Adam step with bias correction and optional decoupled weight decay (AdamW,
// Loshchilov & Hutter; torch.optim.AdamW's order of operations):
//   p <- p - lr * wd * p
//   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
//   p <- p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
// weight_decay = 0 is plain Adam. Master state (param, m, v) is f32; the
// gradient may be f32, bf16 or f16 (widened). CUDA: kernels/ops/cuda/
// elementwise.cu, the same f32 scalars and the same expression.
#pragma once

#include <cstdint>

#include "harness/tensor.h"

namespace sextant::ops {

// Hyperparameters in f64, as torch keeps them (Python floats): 0.999 in f32
// is 0.99900001, which makes 1 - beta2 wrong by 1.3e-5 relative, more than
// the f32 floor. The scalars derived from them are rounded to f32 once.
struct AdamConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // decoupled: applied to p, not added to g
  bool operator==(const AdamConfig&) const = default;
};

// param, grad, exp_avg (m), exp_avg_sq (v): same shape, any rank; step t >= 1
// counts the steps taken including this one. Updates param, m, v in place.
void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t step,
               const AdamConfig& config);

}  // namespace sextant::ops
