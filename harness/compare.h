// Numerical comparison against the float64 reference:
// error(x) = ||x - ref||_2 / ||ref||_2, plus the max abs error; NaN/Inf are
// counted (and make the error infinite). harness/tolerance.h holds the
// bounds an error is held to.
#pragma once

#include <cstdint>
#include <string>

#include "harness/dtype.h"
#include "harness/tensor.h"

namespace sextant {

struct ErrorStats {
  double rel_l2 = 0;      // ||x - ref|| / ||ref|| (absolute when ref is all zero)
  double max_abs = 0;     // max |x - ref| over finite elements
  double ref_norm = 0;    // ||ref||
  int64_t nonfinite = 0;  // NaN or Inf elements in x
  int64_t count = 0;
};

// Both host tensors of the same shape, any dtypes; computed in float64.
ErrorStats compare(const Tensor& x, const Tensor& ref);

}  // namespace sextant
