// Numerical comparison and the conformance tolerance table (DESIGN.md,
// "Conformance policy"): a distributed result passes when
//   error(dist) <= max(2 * error(base), floor(dtype))
// with error(x) = ||x - ref||_2 / ||ref||_2, ref the float64 reference and
// base the same kernel on one rank in the test dtype. NaN/Inf always fail.
#pragma once

#include <cstdint>
#include <string>

#include "harness/dtype.h"
#include "harness/tensor.h"

namespace sextant {

struct ErrorStats {
  double rel_l2 = 0;     // ||x - ref|| / ||ref|| (absolute when ref is all zero)
  double max_abs = 0;    // max |x - ref| over finite elements
  double ref_norm = 0;   // ||ref||
  int64_t nonfinite = 0; // NaN or Inf elements in x
  int64_t count = 0;
};

// Both host tensors of the same shape, any dtypes; computed in float64.
ErrorStats compare(const Tensor& x, const Tensor& ref);

// The one tolerance table. Each floor is the relative L2 error a correct
// kernel in that storage dtype may show on our small test problems.
struct ToleranceRow {
  DType dtype;
  double floor;
  const char* reason;
};
const ToleranceRow& tolerance(DType dtype);
// max(2 * base_error, floor(dtype)).
double conformance_bound(DType dtype, double base_error);

}  // namespace sextant
