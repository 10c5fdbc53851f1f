#include "reference/mlp.h"

#include <gtest/gtest.h>

#include "harness/compare.h"
#include "harness/rng.h"
#include "reference/gelu.h"
#include "reference/testing/gradcheck.h"
#include "reference/layernorm.h"
#include "reference/linear.h"

namespace sextant::ref {
namespace {

Tensor rnd(const Shape& s, const char* name, double scale = 1.0) {
  return random_tensor(s, DType::f64, {13, tensor_id(name), scale});
}

MlpParams params(int64_t h, int64_t ffn) {
  return {rnd({h}, "gamma"), rnd({h}, "beta"),    rnd({h, ffn}, "w1"),
          rnd({ffn}, "b1"),  rnd({ffn, h}, "w2"), rnd({h}, "b2")};
}

TEST(RefMlp, ForwardIsTheResidualOfTheComposition) {
  const MlpParams p = params(4, 8);
  Tensor x = rnd({2, 3, 4}, "x");
  Tensor branch = linear_forward(
      gelu_forward(linear_forward(layernorm_forward(x, p.ln_gamma, p.ln_beta).y, p.w1, p.b1)), p.w2, p.b2);
  Tensor y = mlp_forward(x, p);
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(y.at(i), x.at(i) + branch.at(i), 1e-15);
}

TEST(RefMlp, BackwardMatchesFiniteDifferencesForEveryInput) {
  const MlpParams p = params(4, 8);
  Tensor x = rnd({3, 4}, "x", 2.0), dy = rnd({3, 4}, "dy");
  const MlpGrads g = mlp_backward(dy, x, p);
  // One probe per tensor: replace that tensor by v, keep the others.
  auto check = [&](const char* name, const Tensor& analytic, const Tensor& at, auto with) {
    auto loss = [&](const Tensor& v) {
      MlpParams q = p;
      Tensor xv = x;
      with(q, xv, v);
      return dot(dy, mlp_forward(xv, q));
    };
    EXPECT_LT(compare(analytic, numeric_gradient(loss, at)).rel_l2, kGradcheckTolerance) << name;
  };
  check("x", g.dx, x, [](MlpParams&, Tensor& xv, const Tensor& v) { xv = v; });
  check("gamma", g.dln_gamma, p.ln_gamma, [](MlpParams& q, Tensor&, const Tensor& v) { q.ln_gamma = v; });
  check("beta", g.dln_beta, p.ln_beta, [](MlpParams& q, Tensor&, const Tensor& v) { q.ln_beta = v; });
  check("w1", g.dw1, p.w1, [](MlpParams& q, Tensor&, const Tensor& v) { q.w1 = v; });
  check("b1", g.db1, p.b1, [](MlpParams& q, Tensor&, const Tensor& v) { q.b1 = v; });
  check("w2", g.dw2, p.w2, [](MlpParams& q, Tensor&, const Tensor& v) { q.w2 = v; });
  check("b2", g.db2, p.b2, [](MlpParams& q, Tensor&, const Tensor& v) { q.b2 = v; });
}

}  // namespace
}  // namespace sextant::ref
