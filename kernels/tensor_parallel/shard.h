// Shard helpers shared by the TP/SP kernels: deterministic initialization of
// a rank's block of a global tensor, the layout changes that let a
// contiguous collective act along one dimension, and the residual add.
// Host or device tensors (the device paths call kernels/ops/cuda_ops.h).
#pragma once

#include "harness/rng.h"
#include "harness/tensor.h"

namespace sextant::tp {

// Part `index` of `parts` equal parts along `dim` of the global random tensor
// (spec as in harness/rng.h): what random_tensor(global) holds there.
// Generated on `device` (the same values there: kernels/ops/random.h).
Tensor random_shard(const Shape& global, int dim, int parts, int index, DType dtype, const RandomSpec& spec,
                    Device device = Device::host);

// x: [A..., D, B...] -> [n, A..., D/n, B...]: part r of dim becomes the
// contiguous block r, so that a collective over a contiguous buffer acts along
// `dim` (BSH activations sharded along the sequence, dim 1). A reshape, no
// copy, when no dimension precedes `dim` but size-1 ones.
Tensor split_dim_to_front(const Tensor& x, int dim, int n);
// The inverse: y: [n, A..., D/n, B...] -> [A..., D, B...].
Tensor merge_front_into_dim(const Tensor& y, int dim);

// y += x element-wise (same shape and dtype), computed in f32 (f64 for f64)
// and rounded once: the residual connection and gradient sums.
void add_into(Tensor& y, const Tensor& x);

}  // namespace sextant::tp
