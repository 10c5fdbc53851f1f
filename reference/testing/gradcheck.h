// Central finite differences in float64, for checking backward functions:
//   dL/dx_i ~ (L(x + h e_i) - L(x - h e_i)) / (2h),
// with truncation error O(h^2 L''') and rounding error O(eps |L| / h); h = 1e-5
// balances them near 1e-10 for O(1) functions, far below the 1e-7 the tests ask.
#pragma once

#include <functional>

#include "harness/tensor.h"

namespace sextant::ref {

// Relative L2 error a correct analytic gradient stays under (observed ~1e-9;
// a wrong term gives 1e-3 or more).
constexpr double kGradcheckTolerance = 1e-7;

// Gradient of the scalar loss(x) with respect to every element of x (f64, x's shape).
Tensor numeric_gradient(const std::function<double(const Tensor&)>& loss, const Tensor& x, double h = 1e-5);

// sum_i a_i b_i in f64: the usual probe loss L = <w, f(x)> whose gradient is
// backward(dy = w).
double dot(const Tensor& a, const Tensor& b);

}  // namespace sextant::ref
