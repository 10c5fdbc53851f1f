// LayerNorm over the last dimension (the hidden size h):
//   y = (x - mean) * rstd * gamma + beta,  rstd = 1 / sqrt(var + eps),
// var the biased variance of the row. Host: f32 compute (f64 for f64 storage);
// x / y / dy / dx in f32, bf16 or f16 storage, each tensor widened on load and
// rounded once on store. gamma, beta and their gradients may have their own
// dtype (e.g. f32 parameters with bf16 activations). Two-pass statistics: the
// f32 error grows like u * |mean| / std (the mean itself is an f32), not
// like u * (mean / std)^2 as a one-pass E[x^2] - E[x]^2 would.
#pragma once

#include "harness/tensor.h"

namespace sextant::ops {

// What the backward needs from the forward; one value per row, in the compute
// dtype (f32, or f64 for f64 storage), on x's device.
struct LayerNormStats {
  Tensor mean;  // [rows]
  Tensor rstd;  // [rows]
};

// x: [..., h]; gamma, beta: [h]; y: [..., h] (same shape as x, written).
// Returns mean and rstd per row (rows = numel / h).
LayerNormStats layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                 float eps = 1e-5f);

// dy, x: [..., h]; gamma: [h]; stats from the forward of x.
// Writes dx: [..., h], dgamma, dbeta: [h] (overwritten, summed over the rows
// of this call; under SP the caller all-reduces them over the TP group).
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const LayerNormStats& stats, Tensor& dx,
                        Tensor& dgamma, Tensor& dbeta);

}  // namespace sextant::ops
