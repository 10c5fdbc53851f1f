// Bias add over the last dimension and its gradient (column sums).
// Host: f32 compute (f64 for f64 storage); every tensor in f32 / bf16 / f16
// storage, widened on load and rounded once on store.
#pragma once

#include "harness/tensor.h"

namespace sextant::ops {

// x: [..., n]; bias: [n]; y = x + bias per row, same shape as x (may be x itself).
void bias_add(const Tensor& x, const Tensor& bias, Tensor& y);

// dy: [..., n] -> dbias: [n], dbias[j] = sum over rows of dy[r, j] (overwritten).
void bias_backward(const Tensor& dy, Tensor& dbias);

}  // namespace sextant::ops
