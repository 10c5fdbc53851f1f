// Small helpers of the float64 reference: every function takes tensors of any
// dtype (the test dtype's rounded values), reads them as f64, and returns f64.
#pragma once

#include <cstdint>
#include <string_view>

#include "harness/tensor.h"

namespace sextant::ref {

// t as f64 (a copy when it is another dtype). Throws unless t is a defined host tensor.
Tensor as_f64(const Tensor& t);
// Rows of a tensor [..., n]: the product of the leading dims.
int64_t rows_of(const Tensor& t);
// RuntimeError "<what>: <name> [..] must be [..]" unless the shape matches.
void expect_shape(std::string_view what, std::string_view name, const Tensor& t, const Shape& expected);
// The shape of t with its last dimension replaced.
Shape with_last_dim(const Shape& shape, int64_t last);

}  // namespace sextant::ref
