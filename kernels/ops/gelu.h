// GELU, tanh form (GPT-2, Megatron's openai_gelu):
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
// Host: element-wise, f32 compute (f64 for f64 storage), any shape, storage
// f32 / bf16 / f16 widened on load and rounded once on store. Computed as
// x * sigmoid(2u), the same function, so that one vectorizable exp serves.
#pragma once

#include "harness/tensor.h"

namespace sextant::ops {

// x: [...]; y: same shape (may be x itself).
void gelu_forward(const Tensor& x, Tensor& y);

// dy, x: [...]; dx = dy * gelu'(x), same shape (may alias dy).
void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx);

}  // namespace sextant::ops
