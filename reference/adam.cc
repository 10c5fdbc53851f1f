#include "reference/adam.h"

#include <cmath>

#include "harness/error.h"
#include "reference/f64_tensor.h"

namespace sextant::ref {

void adam_step(Tensor& param, const Tensor& grad_in, Tensor& m, Tensor& v, int64_t step, const AdamConfig& c) {
  const Tensor grad = as_f64(grad_in);
  expect_shape("ref::adam_step", "grad", grad, param.shape());
  expect_shape("ref::adam_step", "m", m, param.shape());
  expect_shape("ref::adam_step", "v", v, param.shape());
  if (step < 1) throw RuntimeError("ref::adam_step: step must be >= 1");
  double *P = param.data<double>(), *M = m.data<double>(), *V = v.data<double>();
  const double* G = grad.data<double>();
  const double t = static_cast<double>(step);
  for (int64_t i = 0; i < param.numel(); ++i) {
    P[i] -= c.lr * c.weight_decay * P[i];
    M[i] = c.beta1 * M[i] + (1 - c.beta1) * G[i];
    V[i] = c.beta2 * V[i] + (1 - c.beta2) * G[i] * G[i];
    const double m_hat = M[i] / (1 - std::pow(c.beta1, t));
    const double v_hat = V[i] / (1 - std::pow(c.beta2, t));
    P[i] -= c.lr * m_hat / (std::sqrt(v_hat) + c.eps);
  }
}

}  // namespace sextant::ref
