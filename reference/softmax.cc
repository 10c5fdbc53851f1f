#include "reference/softmax.h"

#include <algorithm>
#include <cmath>

#include "reference/f64_tensor.h"

namespace sextant::ref {

Tensor softmax_forward(const Tensor& x_in) {
  const Tensor x = as_f64(x_in);
  const int64_t rows = rows_of(x), n = x.dim(-1);
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  if (n == 0) return y;
  const double* X = x.data<double>();
  double* Y = y.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = X + r * n;
    const double max = *std::max_element(xr, xr + n);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(xr[j] - max);
    for (int64_t j = 0; j < n; ++j) Y[r * n + j] = std::exp(xr[j] - max) / sum;
  }
  return y;
}

Tensor softmax_backward(const Tensor& dy_in, const Tensor& y_in) {
  const Tensor dy = as_f64(dy_in), y = as_f64(y_in);
  expect_shape("ref::softmax_backward", "dy", dy, y.shape());
  const int64_t rows = rows_of(y), n = y.dim(-1);
  Tensor dx = Tensor::empty(y.shape(), DType::f64);
  const double *DY = dy.data<double>(), *Y = y.data<double>();
  double* DX = dx.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t j = 0; j < n; ++j) dot += DY[r * n + j] * Y[r * n + j];
    for (int64_t k = 0; k < n; ++k) DX[r * n + k] = Y[r * n + k] * (DY[r * n + k] - dot);
  }
  return dx;
}

}  // namespace sextant::ref
