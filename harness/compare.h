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

// A systematic difference between two results of the same problem, x and
// y, which a norm cannot tell from rounding noise (docs/CONFORMANCE.md,
// "Systematic errors"). With d = x - y and r the reference:
//   scale   c = <d, r> / <r, r>          x = y (1 + c) + noise: a scale error
//   offset  m = mean(d) / rms(r)         a bias of the same sign everywhere
// Each with its standard error, estimated from the same tensors' rounding
// noise by the delete-one-group jackknife over `groups` contiguous groups of
// elements (a group holds whole rows, so noise shared within a row, such as
// a row's LSE or LayerNorm statistics, is counted; Efron and Stein, "The
// Jackknife Estimate of Variance", Ann. Statist. 9(3), 1981).
struct Systematic {
  bool estimated = false;  // false: too few elements, a zero reference, or NaN/Inf
  double scale = 0, scale_se = 0;
  double offset = 0, offset_se = 0;
};
// x, y, ref: host tensors of one shape. Not estimated below `min_elements`.
Systematic systematic_difference(const Tensor& x, const Tensor& y, const Tensor& ref, int groups, int64_t min_elements);
// The scale coefficient of x against the reference alone, <x - r, r> / <r, r>.
double scale_against(const Tensor& x, const Tensor& ref);

}  // namespace sextant
