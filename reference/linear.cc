#include "reference/linear.h"

#include "reference/f64_tensor.h"

namespace sextant::ref {

Tensor linear_forward(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  const Tensor x = as_f64(x_in), w = as_f64(w_in);
  const int64_t rows = rows_of(x), in = x.dim(-1), out = w.dim(-1);
  expect_shape("ref::linear_forward", "w", w, {in, out});
  const Tensor b = b_in.defined() ? as_f64(b_in) : Tensor::zeros({out}, DType::f64);
  expect_shape("ref::linear_forward", "b", b, {out});
  Tensor y = Tensor::empty(with_last_dim(x.shape(), out), DType::f64);
  const double *X = x.data<double>(), *W = w.data<double>(), *B = b.data<double>();
  double* Y = y.data<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = B[o];
      for (int64_t i = 0; i < in; ++i) s += X[r * in + i] * W[i * out + o];
      Y[r * out + o] = s;
    }
  return y;
}

LinearGrads linear_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& w_in, bool has_bias) {
  const Tensor dy = as_f64(dy_in), x = as_f64(x_in), w = as_f64(w_in);
  const int64_t rows = rows_of(x), in = x.dim(-1), out = w.dim(-1);
  expect_shape("ref::linear_backward", "w", w, {in, out});
  expect_shape("ref::linear_backward", "dy", dy, with_last_dim(x.shape(), out));
  const double *DY = dy.data<double>(), *X = x.data<double>(), *W = w.data<double>();
  LinearGrads g{Tensor::zeros(x.shape(), DType::f64), Tensor::zeros({in, out}, DType::f64), Tensor{}};
  double *DX = g.dx.data<double>(), *DW = g.dw.data<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) {
        DX[r * in + i] += DY[r * out + o] * W[i * out + o];  // dx = dy W^T
        DW[i * out + o] += X[r * in + i] * DY[r * out + o];  // dW = x^T dy
      }
  if (has_bias) {
    g.db = Tensor::zeros({out}, DType::f64);
    double* DB = g.db.data<double>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) DB[o] += DY[r * out + o];
  }
  return g;
}

}  // namespace sextant::ref
