#include "kernels/ops/layernorm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "harness/kernel_fault.h"
#include "harness/op_times.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/ops/host_common.h"
#include "kernels/ops/op_names.h"
#include "kernels/ops/simd.h"

namespace sextant::ops {

namespace {

// Rows of h: mean and variance in two passes (x - mean before squaring
// keeps the variance accurate when |mean| >> std), then the affine output.
// x, y: [rows, h]; gamma, beta: [h]; mean, rstd: [rows].
template <class F>
void layernorm_rows(int64_t rows, int64_t h, const F* x, const F* gamma, const F* beta, F eps, F* y, F* mean, F* rstd) {
  const F var_count = kernel_fault_planted(KernelFault::layernorm_forward_variance) ? F(h - 1) : F(h);
  run_simd([&](auto) SEXTANT_INLINE_LAMBDA {  // compiled per ISA level; the loops auto-vectorize
    for (int64_t r = 0; r < rows; ++r) {
      const F* xr = x + r * h;
      F* yr = y + r * h;
      const F m = lane_sum<F>(h, [&](int64_t j) { return xr[j]; }) / F(h);
      const F var = lane_sum<F>(h, [&](int64_t j) { return (xr[j] - m) * (xr[j] - m); }) / var_count;
      const F rs = F(1) / std::sqrt(var + eps);
      for (int64_t j = 0; j < h; ++j) yr[j] = (xr[j] - m) * rs * gamma[j] + beta[j];
      mean[r] = m;
      rstd[r] = rs;
    }
  });
}

// The backward row by row, with xhat = (x - mean) rstd and g = dy gamma:
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),
// accumulating dgamma += dy xhat and dbeta += dy over the rows (a loop of its
// own: with dx in the same loop, too many pointers for GCC's alias checks and
// the loop stays scalar).
template <class F>
void layernorm_backward_rows(int64_t rows, int64_t h, const F* dy, const F* x, const F* gamma, const F* mean,
                             const F* rstd, F* dx, F* dgamma, F* dbeta) {
  const bool no_mean_term = kernel_fault_planted(KernelFault::layernorm_backward_mean_term);
  run_simd([&](auto) SEXTANT_INLINE_LAMBDA {
    for (int64_t r = 0; r < rows; ++r) {
      const F *dyr = dy + r * h, *xr = x + r * h;
      F* dxr = dx + r * h;
      const F m = mean[r], rs = rstd[r];
      auto xhat = [&](int64_t j) { return (xr[j] - m) * rs; };
      const F g_mean = lane_sum<F>(h, [&](int64_t j) { return dyr[j] * gamma[j]; }) / F(h);
      const F gx_mean =
          no_mean_term ? F(0) : lane_sum<F>(h, [&](int64_t j) { return dyr[j] * gamma[j] * xhat(j); }) / F(h);
      for (int64_t j = 0; j < h; ++j) dxr[j] = rs * (dyr[j] * gamma[j] - g_mean - xhat(j) * gx_mean);
      for (int64_t j = 0; j < h; ++j) {
        dgamma[j] += dyr[j] * xhat(j);
        dbeta[j] += dyr[j];
      }
    }
  });
}

void check_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& y) {
  const char* op = "layernorm_forward";
  require_one_device(op, {{"x", &x}, {"gamma", &gamma}, {"beta", &beta}, {"y", &y}});
  require_rows(op, "x", x);
  require_shape(op, "gamma", gamma, {x.dim(-1)});
  require_shape(op, "beta", beta, {x.dim(-1)});
  require_shape(op, "y", y, x.shape());
}

void check_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const LayerNormStats& stats,
                    const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  const char* op = "layernorm_backward";
  require_one_device(op, {{"dy", &dy},
                          {"x", &x},
                          {"gamma", &gamma},
                          {"mean", &stats.mean},
                          {"rstd", &stats.rstd},
                          {"dx", &dx},
                          {"dgamma", &dgamma},
                          {"dbeta", &dbeta}});
  require_rows(op, "x", x);
  const Shape h{x.dim(-1)}, rows{rows_of(x)};
  require_shape(op, "dy", dy, x.shape());
  require_shape(op, "dx", dx, x.shape());
  require_shape(op, "gamma", gamma, h);
  require_shape(op, "dgamma", dgamma, h);
  require_shape(op, "dbeta", dbeta, h);
  require_shape(op, "mean", stats.mean, rows);
  require_shape(op, "rstd", stats.rstd, rows);
}

}  // namespace

LayerNormStats layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, float eps) {
  OpTimer timer(timed::kLayerNorm, x.device());
  check_forward(x, gamma, beta, y);
  const int64_t rows = rows_of(x), h = x.dim(-1);
  LayerNormStats stats{Tensor::empty({rows}, compute_dtype(x.dtype()), x.device()),
                       Tensor::empty({rows}, compute_dtype(x.dtype()), x.device())};
  if (!x.is_host()) {
    SEXTANT_CUDA_CALL(cuda::layernorm_forward(x, gamma, beta, y, eps, stats.mean, stats.rstd));
    return stats;
  }
  with_compute_type(x.dtype(), [&](auto tag) {
    using F = decltype(tag);
    HostIn<F> x_in(x), gamma_in(gamma), beta_in(beta);
    HostOut<F> y_out(y);
    layernorm_rows<F>(rows, h, x_in.get(), gamma_in.get(), beta_in.get(), F(eps), y_out.get(), stats.mean.data<F>(),
                      stats.rstd.data<F>());
    y_out.store();
  });
  return stats;
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const LayerNormStats& stats, Tensor& dx,
                        Tensor& dgamma, Tensor& dbeta) {
  OpTimer timer(timed::kLayerNorm, x.device());
  check_backward(dy, x, gamma, stats, dx, dgamma, dbeta);
  if (!x.is_host())
    return SEXTANT_CUDA_CALL(cuda::layernorm_backward(dy, x, gamma, stats.mean, stats.rstd, dx, dgamma, dbeta));
  const int64_t rows = rows_of(x), h = x.dim(-1);
  with_compute_type(x.dtype(), [&](auto tag) {
    using F = decltype(tag);
    HostIn<F> dy_in(dy), x_in(x), gamma_in(gamma), mean(stats.mean), rstd(stats.rstd);
    HostOut<F> dx_out(dx);
    std::vector<F> dgamma_acc(h, F(0)), dbeta_acc(h, F(0));  // compute-type sums, rounded once below
    layernorm_backward_rows<F>(rows, h, dy_in.get(), x_in.get(), gamma_in.get(), mean.get(), rstd.get(), dx_out.get(),
                               dgamma_acc.data(), dbeta_acc.data());
    dx_out.store();
    HostOut<F> dgamma_out(dgamma), dbeta_out(dbeta);
    std::copy(dgamma_acc.begin(), dgamma_acc.end(), dgamma_out.get());
    std::copy(dbeta_acc.begin(), dbeta_acc.end(), dbeta_out.get());
    dgamma_out.store();
    dbeta_out.store();
  });
}

}  // namespace sextant::ops
