#include "reference/testing/gradcheck.h"

#include "reference/f64_tensor.h"

namespace sextant::ref {

Tensor numeric_gradient(const std::function<double(const Tensor&)>& loss, const Tensor& x_in, double h) {
  Tensor x = as_f64(x_in).clone();
  Tensor grad = Tensor::empty(x.shape(), DType::f64);
  double* X = x.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double saved = X[i];
    X[i] = saved + h;
    const double plus = loss(x);
    X[i] = saved - h;
    const double minus = loss(x);
    X[i] = saved;
    grad.data<double>()[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

double dot(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = as_f64(a_in), b = as_f64(b_in);
  expect_shape("ref::dot", "b", b, a.shape());
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.data<double>()[i] * b.data<double>()[i];
  return s;
}

}  // namespace sextant::ref
