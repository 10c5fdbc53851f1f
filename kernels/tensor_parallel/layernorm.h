// LayerNorm outside the TP region. Its statistics are per token (over the
// hidden dimension), so under SP each rank normalizes its own sequence shard
// with no communication: the saved input and statistics shrink TP-fold.
// gamma and beta are replicated over TP; under SP their gradients here are
// partial sums over this rank's tokens (reduce_sequence_parallel_grads).
#pragma once

#include <cstddef>

#include "kernels/ops/layernorm.h"
#include "kernels/tensor_parallel/tp_group.h"

namespace sextant::tp {

// Held between forward and backward.
struct LayerNormSaved {
  Tensor x;                   // [b, s/tp | s, h] the input
  ops::LayerNormStats stats;  // mean, rstd: [b * s/tp | b * s]
  size_t bytes() const;
};

// x: [b, s/tp, h] (SP) or [b, s, h]; gamma, beta: [h] -> y: like x.
Tensor layernorm_forward(const TpGroup& g, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         LayerNormSaved& saved);
// dy: like x -> dx: like x. Writes dgamma, dbeta: [h] in grad_dtype(gamma),
// the sums over this rank's tokens.
Tensor layernorm_backward(const TpGroup& g, const LayerNormSaved& saved, const Tensor& gamma, const Tensor& dy,
                          Tensor& dgamma, Tensor& dbeta);

}  // namespace sextant::tp
