// Linear layer, float64: y = x W + b, with W stored [in, out] (Megatron's
// Y = X A notation: column-parallel splits W along out, row-parallel along in).
#pragma once

#include "harness/tensor.h"

namespace sextant::ref {

// x: [..., in]; w: [in, out]; b: [out] or undefined (no bias) -> y: [..., out].
Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b = {});

struct LinearGrads {
  Tensor dx;  // [..., in]   dy W^T
  Tensor dw;  // [in, out]   x^T dy (summed over all rows)
  Tensor db;  // [out]       column sums of dy; undefined without bias
};
// dy: [..., out]; x: [..., in]; w: [in, out].
LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias = true);

}  // namespace sextant::ref
