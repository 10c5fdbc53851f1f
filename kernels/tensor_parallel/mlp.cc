#include "kernels/tensor_parallel/mlp.h"

#include <cmath>

#include "kernels/ops/gelu.h"
#include "kernels/tensor_parallel/shard.h"

namespace sextant::tp {

Tensor mlp_forward(const TpGroup& g, const MlpWeights& w, const Tensor& x, MlpSaved& saved) {
  Tensor ln = layernorm_forward(g, x, w.ln_gamma, w.ln_beta, saved.ln);  // [b, s/tp | s, h]
  saved.a = column_parallel_forward(g, w.fc1, ln, saved.fc1);            // [b, s, ffn/tp]
  Tensor z = Tensor::empty(saved.a.shape(), saved.a.dtype(), saved.a.device());
  ops::gelu_forward(saved.a, z);
  Tensor y = row_parallel_forward(g, w.fc2, z, saved.fc2);  // [b, s/tp | s, h]
  add_into(y, x);                                           // residual
  return y;
}

Tensor mlp_backward(const TpGroup& g, const MlpWeights& w, const MlpSaved& saved, const Tensor& dy, MlpGrads& grads) {
  Tensor dz = row_parallel_backward(g, w.fc2, saved.fc2, dy, grads.fc2);      // [b, s, ffn/tp]
  ops::gelu_backward(dz, saved.a, dz);                                        // now da
  Tensor dln = column_parallel_backward(g, w.fc1, saved.fc1, dz, grads.fc1);  // [b, s/tp | s, h]
  Tensor dx = layernorm_backward(g, saved.ln, w.ln_gamma, dln, grads.ln_gamma, grads.ln_beta);
  add_into(dx, dy);  // residual
  return dx;
}

Tensor mlp_backward_input(const TpGroup& g, const MlpWeights& w, const MlpSaved& saved, const Tensor& dy,
                          MlpPendingGrads& pending) {
  Tensor dz = row_parallel_backward_input(g, w.fc2, dy, pending.fc2);      // [b, s, ffn/tp]
  ops::gelu_backward(dz, saved.a, dz);                                     // now da
  Tensor dln = column_parallel_backward_input(g, w.fc1, dz, pending.fc1);  // [b, s/tp | s, h]
  Tensor dx = layernorm_backward(g, saved.ln, w.ln_gamma, dln, pending.ln_gamma, pending.ln_beta);
  add_into(dx, dy);  // residual
  return dx;
}

void mlp_backward_weight(const TpGroup& g, const MlpWeights& w, const MlpSaved& saved, const MlpPendingGrads& pending,
                         MlpGrads& grads) {
  row_parallel_backward_weight(g, w.fc2, saved.fc2, pending.fc2, grads.fc2);
  column_parallel_backward_weight(g, w.fc1, saved.fc1, pending.fc1, grads.fc1);
  grads.ln_gamma = pending.ln_gamma;
  grads.ln_beta = pending.ln_beta;
}

void accumulate_grads(MlpGrads& sum, MlpGrads& more) {
  std::vector<Tensor*> into = sum.all(), from = more.all();
  for (size_t i = 0; i < into.size(); ++i) {
    if (!from[i]->defined()) continue;
    if (into[i]->defined()) add_into(*into[i], *from[i]);
    else *into[i] = from[i]->clone();
  }
}

void zero_grads(MlpGrads& sum) {
  for (Tensor* t : sum.all())
    if (t->defined()) t->zero();
}

MlpWeights init_mlp_weights(const MlpDims& d, int tp_rank, int tp_size, DType dtype, uint64_t seed,
                            const std::string& prefix, Device device) {
  auto spec = [&](const char* name, double scale) { return RandomSpec{seed, tensor_id(prefix + name), scale}; };
  const double s1 = 1 / std::sqrt(static_cast<double>(d.hidden)), s2 = 1 / std::sqrt(static_cast<double>(d.ffn));
  MlpWeights w;
  w.ln_gamma = random_shard({d.hidden}, 0, 1, 0, dtype, spec(".ln_gamma", 1.0), device);
  w.ln_beta = random_shard({d.hidden}, 0, 1, 0, dtype, spec(".ln_beta", 1.0), device);
  w.fc1.w = random_shard({d.hidden, d.ffn}, 1, tp_size, tp_rank, dtype, spec(".w1", s1), device);
  w.fc1.b = random_shard({d.ffn}, 0, tp_size, tp_rank, dtype, spec(".b1", 0.1), device);
  w.fc2.w = random_shard({d.ffn, d.hidden}, 0, tp_size, tp_rank, dtype, spec(".w2", s2), device);
  w.fc2.b = random_shard({d.hidden}, 0, 1, 0, dtype, spec(".b2", 0.1), device);
  return w;
}

void use_fp8_linears(MlpWeights& w, const ops::Fp8Recipe& recipe) {
  w.fc1.fp8 = std::make_shared<Fp8LinearState>(recipe);
  w.fc2.fp8 = std::make_shared<Fp8LinearState>(recipe);
}

}  // namespace sextant::tp
