#include "reference/layernorm.h"

#include <cmath>

#include "reference/f64_tensor.h"

namespace sextant::ref {

LayerNormOut layernorm_forward(const Tensor& x_in, const Tensor& gamma_in, const Tensor& beta_in, double eps) {
  const Tensor x = as_f64(x_in), gamma = as_f64(gamma_in), beta = as_f64(beta_in);
  const int64_t rows = rows_of(x), h = x.dim(-1);
  expect_shape("ref::layernorm_forward", "gamma", gamma, {h});
  expect_shape("ref::layernorm_forward", "beta", beta, {h});
  LayerNormOut out{Tensor::empty(x.shape(), DType::f64), Tensor::empty({rows}, DType::f64),
                   Tensor::empty({rows}, DType::f64)};
  const double *X = x.data<double>(), *G = gamma.data<double>(), *B = beta.data<double>();
  double* Y = out.y.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = X + r * h;
    double mean = 0;
    for (int64_t j = 0; j < h; ++j) mean += xr[j];
    mean /= h;
    double var = 0;
    for (int64_t j = 0; j < h; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= h;
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < h; ++j) Y[r * h + j] = (xr[j] - mean) * rstd * G[j] + B[j];
    out.mean.set(r, mean);
    out.rstd.set(r, rstd);
  }
  return out;
}

// With xhat = (x - mean) rstd and g = dy * gamma (the gradient at xhat):
//   dxhat_j/dx_k = rstd (delta_jk - 1/h - xhat_j xhat_k / h), so
//   dx_k = rstd (g_k - (1/h) sum_j g_j - xhat_k (1/h) sum_j g_j xhat_j).
LayerNormGrads layernorm_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& gamma_in, double eps) {
  const Tensor dy = as_f64(dy_in), x = as_f64(x_in), gamma = as_f64(gamma_in);
  const int64_t rows = rows_of(x), h = x.dim(-1);
  expect_shape("ref::layernorm_backward", "dy", dy, x.shape());
  expect_shape("ref::layernorm_backward", "gamma", gamma, {h});
  const LayerNormOut fwd = layernorm_forward(x, gamma, Tensor::zeros({h}, DType::f64), eps);
  LayerNormGrads g{Tensor::empty(x.shape(), DType::f64), Tensor::zeros({h}, DType::f64),
                   Tensor::zeros({h}, DType::f64)};
  const double *DY = dy.data<double>(), *X = x.data<double>(), *G = gamma.data<double>();
  double *DX = g.dx.data<double>(), *DG = g.dgamma.data<double>(), *DB = g.dbeta.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    const double mean = fwd.mean.at(r), rstd = fwd.rstd.at(r);
    double sum_g = 0, sum_g_xhat = 0;
    for (int64_t j = 0; j < h; ++j) {
      const double xhat = (X[r * h + j] - mean) * rstd;
      sum_g += DY[r * h + j] * G[j];
      sum_g_xhat += DY[r * h + j] * G[j] * xhat;
      DG[j] += DY[r * h + j] * xhat;
      DB[j] += DY[r * h + j];
    }
    for (int64_t k = 0; k < h; ++k) {
      const double xhat = (X[r * h + k] - mean) * rstd;
      DX[r * h + k] = rstd * (DY[r * h + k] * G[k] - sum_g / h - xhat * sum_g_xhat / h);
    }
  }
  return g;
}

}  // namespace sextant::ref
