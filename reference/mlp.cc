#include "reference/mlp.h"

#include "reference/f64_tensor.h"
#include "reference/gelu.h"
#include "reference/layernorm.h"
#include "reference/linear.h"

namespace sextant::ref {

namespace {
Tensor add(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = as_f64(a_in), b = as_f64(b_in);
  expect_shape("ref::mlp", "residual", b, a.shape());
  Tensor out = Tensor::empty(a.shape(), DType::f64);
  for (int64_t i = 0; i < a.numel(); ++i) out.data<double>()[i] = a.data<double>()[i] + b.data<double>()[i];
  return out;
}
}  // namespace

MlpActivations mlp_forward_activations(const Tensor& x, const MlpParams& p, double eps) {
  MlpActivations act;
  act.ln = layernorm_forward(x, p.ln_gamma, p.ln_beta, eps).y;
  act.a = linear_forward(act.ln, p.w1, p.b1);
  act.g = gelu_forward(act.a);
  act.y = add(x, linear_forward(act.g, p.w2, p.b2));
  return act;
}

Tensor mlp_forward(const Tensor& x, const MlpParams& p, double eps) { return mlp_forward_activations(x, p, eps).y; }

// Backward in reverse order: y = x + z, so dz = dy and dx gets dy directly
// plus the gradient through the LayerNorm branch.
MlpGrads mlp_backward(const Tensor& dy, const Tensor& x, const MlpParams& p, double eps) {
  const MlpActivations act = mlp_forward_activations(x, p, eps);
  const LinearGrads second = linear_backward(dy, act.g, p.w2);  // dg, dW2, db2
  const Tensor da = gelu_backward(second.dx, act.a);            // through gelu
  const LinearGrads first = linear_backward(da, act.ln, p.w1);  // dln, dW1, db1
  const LayerNormGrads ln = layernorm_backward(first.dx, x, p.ln_gamma, eps);
  MlpGrads g;
  g.dx = add(dy, ln.dx);
  g.dln_gamma = ln.dgamma;
  g.dln_beta = ln.dbeta;
  g.dw1 = first.dw;
  g.db1 = first.db;
  g.dw2 = second.dw;
  g.db2 = second.db;
  return g;
}

}  // namespace sextant::ref
