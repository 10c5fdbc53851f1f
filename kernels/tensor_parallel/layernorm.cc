#include "kernels/tensor_parallel/layernorm.h"

#include <cmath>
#include <vector>

namespace sextant::tp {

size_t LayerNormSaved::bytes() const { return x.nbytes() + stats.mean.nbytes() + stats.rstd.nbytes(); }

namespace {

// The planted bug layernorm_wrong_axis: on a sequence shard x: [b, s/tp, h],
// each feature j is normalized over the shard's tokens instead of each token
// over its features. Plain loops (on host copies of device tensors): it only
// ever runs in a conformance check.
Tensor layernorm_over_tokens(const Tensor& x_any, const Tensor& gamma_any, const Tensor& beta_any, float eps) {
  auto host = [](const Tensor& t) { return t.is_host() ? t : t.to(Device::host); };
  const Tensor x = host(x_any), gamma = host(gamma_any), beta = host(beta_any);
  const int64_t b = x.dim(0), s = x.dim(1), h = x.dim(2);
  std::vector<double> v = x.to_vector(), gm = gamma.to_vector(), bt = beta.to_vector();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t j = 0; j < h; ++j) {
      auto at = [&](int64_t t) { return (bi * s + t) * h + j; };
      double mean = 0, var = 0;
      for (int64_t t = 0; t < s; ++t) mean += v[at(t)] / s;
      for (int64_t t = 0; t < s; ++t) var += (v[at(t)] - mean) * (v[at(t)] - mean) / s;
      const double rstd = 1 / std::sqrt(var + eps);
      for (int64_t t = 0; t < s; ++t) y.set(at(t), (v[at(t)] - mean) * rstd * gm[j] + bt[j]);
    }
  return x_any.is_host() ? y : y.to(x_any.device());
}

}  // namespace

Tensor layernorm_forward(const TpGroup& g, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         LayerNormSaved& saved) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  saved.x = x;
  saved.stats = ops::layernorm_forward(x, gamma, beta, y);
  if (g.fault == Fault::layernorm_wrong_axis && g.sp()) y = layernorm_over_tokens(x, gamma, beta, 1e-5f);
  return y;
}

Tensor layernorm_backward(const TpGroup&, const LayerNormSaved& saved, const Tensor& gamma, const Tensor& dy,
                          Tensor& dgamma, Tensor& dbeta) {
  Tensor dx = Tensor::empty(saved.x.shape(), saved.x.dtype(), saved.x.device());
  dgamma = Tensor::empty(gamma.shape(), grad_dtype(gamma.dtype()), gamma.device());
  dbeta = Tensor::empty(gamma.shape(), grad_dtype(gamma.dtype()), gamma.device());
  ops::layernorm_backward(dy, saved.x, gamma, saved.stats, dx, dgamma, dbeta);
  return dx;
}

}  // namespace sextant::tp
