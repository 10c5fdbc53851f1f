// The pre-LN MLP block of a GPT layer, float64, composed of the reference
// pieces:
//   ln = LayerNorm(x; gamma, beta)   [..., h]
//   a  = ln W1 + b1                  [..., ffn]
//   g  = gelu(a)                     [..., ffn]
//   y  = x + g W2 + b2               [..., h]    (residual)
#pragma once

#include "harness/tensor.h"

namespace sextant::ref {

struct MlpParams {
  Tensor ln_gamma, ln_beta;  // [h]
  Tensor w1;                 // [h, ffn]
  Tensor b1;                 // [ffn]
  Tensor w2;                 // [ffn, h]
  Tensor b2;                 // [h]
};

struct MlpGrads {
  Tensor dx;                   // [..., h]
  Tensor dln_gamma, dln_beta;  // [h]
  Tensor dw1, db1, dw2, db2;   // shapes of the params
};

// Intermediate activations, for callers that check them too.
struct MlpActivations {
  Tensor ln, a, g;  // [..., h], [..., ffn], [..., ffn]
  Tensor y;         // [..., h]
};

// x: [..., h] -> y: [..., h].
Tensor mlp_forward(const Tensor& x, const MlpParams& p, double eps = 1e-5);
MlpActivations mlp_forward_activations(const Tensor& x, const MlpParams& p, double eps = 1e-5);
// dy: [..., h]; recomputes the forward from x.
MlpGrads mlp_backward(const Tensor& dy, const Tensor& x, const MlpParams& p, double eps = 1e-5);

}  // namespace sextant::ref
