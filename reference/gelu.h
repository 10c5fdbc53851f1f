// GELU, tanh form, float64:
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
#pragma once

#include "harness/tensor.h"

namespace sextant::ref {

// Element-wise, any shape.
Tensor gelu_forward(const Tensor& x);
// dx = dy * gelu'(x), gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx.
Tensor gelu_backward(const Tensor& dy, const Tensor& x);

// The scalar function and its derivative (for composition and tests).
double gelu(double x);
double gelu_derivative(double x);

}  // namespace sextant::ref
