#include "reference/gelu.h"

#include <cmath>
#include <numbers>

#include "reference/f64_tensor.h"

namespace sextant::ref {

namespace {
const double kSqrt2OverPi = std::sqrt(2.0 / std::numbers::pi);
const double kCubic = 0.044715;
double inner(double x) { return kSqrt2OverPi * (x + kCubic * x * x * x); }
}  // namespace

double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(inner(x))); }

double gelu_derivative(double x) {
  const double t = std::tanh(inner(x));
  const double du_dx = kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx;
}

Tensor gelu_forward(const Tensor& x_in) {
  const Tensor x = as_f64(x_in);
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = gelu(x.data<double>()[i]);
  return y;
}

Tensor gelu_backward(const Tensor& dy_in, const Tensor& x_in) {
  const Tensor dy = as_f64(dy_in), x = as_f64(x_in);
  expect_shape("ref::gelu_backward", "dy", dy, x.shape());
  Tensor dx = Tensor::empty(x.shape(), DType::f64);
  for (int64_t i = 0; i < x.numel(); ++i)
    dx.data<double>()[i] = dy.data<double>()[i] * gelu_derivative(x.data<double>()[i]);
  return dx;
}

}  // namespace sextant::ref
