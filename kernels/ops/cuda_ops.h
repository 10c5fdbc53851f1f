// Declarations of the CUDA implementations of kernels/ops (defined in
// kernels/ops/cuda/*.cu, compiled only in CUDA builds). Each mirrors the
// host op of the same name; callers go through the dispatching op.
#pragma once

#include <cstdint>

#include "harness/rng.h"
#include "harness/tensor.h"

namespace sextant::ops::cuda {

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha, float beta,
          int64_t m, int64_t n, int64_t k);

// Fills out (a device tensor) with the block of the global tensor at offset,
// element for element what harness random_block gives (kernels/ops/random.h).
void random_fill(Tensor& out, const Shape& global, const Shape& offset, const RandomSpec& spec);

}  // namespace sextant::ops::cuda
