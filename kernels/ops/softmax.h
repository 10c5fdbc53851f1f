// Softmax over the last dimension (each row of n):
//   y[r, j] = exp(x[r, j] - max_r) / sum_k exp(x[r, k] - max_r).
// Host: f32 compute (f64 for f64 storage), storage f32 / bf16 / f16 widened on
// load and rounded once on store.
#pragma once

#include "harness/tensor.h"

namespace sextant::ops {

// x: [..., n]; y: same shape (may be x itself).
void softmax_forward(const Tensor& x, Tensor& y);

// dy, y: [..., n] (y the forward output); dx = y * (dy - sum_j dy_j y_j) per row.
void softmax_backward(const Tensor& dy, const Tensor& y, Tensor& dx);

}  // namespace sextant::ops
