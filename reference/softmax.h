// Softmax over the last dimension, float64: y_j = exp(x_j - max) / sum_k exp(x_k - max).
#pragma once

#include "harness/tensor.h"

namespace sextant::ref {

// x: [..., n] -> y: [..., n].
Tensor softmax_forward(const Tensor& x);
// dy, y: [..., n] (y the forward output) -> dx_k = sum_j dy_j dy_j/dx_k = y_k (dy_k - sum_j dy_j y_j).
Tensor softmax_backward(const Tensor& dy, const Tensor& y);

}  // namespace sextant::ref
