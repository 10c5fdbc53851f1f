// Deterministic inputs made where they are used: the block of a global
// tensor (harness/rng.h) generated directly on `device`. On CUDA the values
// are computed on the GPU with the host's counter hash; uniform values are
// bit-identical to harness random_block, normal values agree after rounding
// to the dtype except within one double ulp of a rounding boundary
// (kernels/ops/cuda/rng.cu says why). Saves the host generation and the copy
// for large GPU inputs (benchmarks, qualify sizes).
#pragma once

#include "harness/rng.h"

namespace sextant::ops {

// As sextant::random_block, on `device`.
Tensor random_block(const Shape& global, const Shape& offset, const Shape& local, DType dtype, const RandomSpec& spec,
                    Device device);
// As sextant::random_tensor, on `device`.
Tensor random_tensor(const Shape& shape, DType dtype, const RandomSpec& spec, Device device);

}  // namespace sextant::ops
