#include "kernels/ops/adam.h"

#include <cmath>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/op_times.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/ops/host_common.h"
#include "kernels/ops/op_names.h"
#include "kernels/ops/simd.h"

namespace sextant::ops {

namespace {

void check(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, int64_t step) {
  const char* op = "adam_step";
  require_one_device(op, {{"param", &param}, {"grad", &grad}, {"exp_avg", &m}, {"exp_avg_sq", &v}});
  require_shape(op, "grad", grad, param.shape());
  require_shape(op, "exp_avg", m, param.shape());
  require_shape(op, "exp_avg_sq", v, param.shape());
  for (const NamedTensor& t : {NamedTensor{"param", &param}, {"exp_avg", &m}, {"exp_avg_sq", &v}})
    if (t.tensor->dtype() != DType::f32)
      throw RuntimeError(cat(op, ": ", t.name, " is ", dtype_name(t.tensor->dtype()), "; master state must be f32"));
  if (step < 1) throw RuntimeError(cat(op, ": step ", step, " must be >= 1 (bias correction 1 - beta^step)"));
}

// The f32 update with every scalar precomputed (see adam_step); the CUDA
// kernel takes the same scalars.
using AdamScalars = cuda::AdamScalars;

void adam_update_f32(int64_t n, float* p, const float* g, float* m, float* v, const AdamScalars s) {
  run_simd([&](auto) SEXTANT_INLINE_LAMBDA {  // compiled per ISA level; the loop auto-vectorizes
    for (int64_t i = 0; i < n; ++i) {
      m[i] = s.beta1 * m[i] + s.one_minus_beta1 * g[i];
      v[i] = s.beta2 * v[i] + s.one_minus_beta2 * g[i] * g[i];
      const float denom = std::sqrt(v[i]) * s.inv_sqrt_bc2 + s.eps;
      p[i] = p[i] * s.decay - s.step_size * m[i] / denom;
    }
  });
}

}  // namespace

void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, int64_t step,
               const AdamConfig& c) {
  OpTimer timer(timed::kAdam, param.device());
  check(param, grad, exp_avg, exp_avg_sq, step);
  // Every scalar derived in f64 (beta^t for large t, 1 - beta close to 0),
  // then rounded to f32 once.
  const double t = static_cast<double>(step);
  AdamScalars s;
  s.beta1 = static_cast<float>(c.beta1);
  s.beta2 = static_cast<float>(c.beta2);
  s.one_minus_beta1 = static_cast<float>(1.0 - c.beta1);
  s.one_minus_beta2 = static_cast<float>(1.0 - c.beta2);
  s.step_size = static_cast<float>(c.lr / (1.0 - std::pow(c.beta1, t)));
  s.inv_sqrt_bc2 = kernel_fault_planted(KernelFault::adam_bias_correction)
                       ? 1.0f
                       : static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(c.beta2, t)));
  s.decay = static_cast<float>(1.0 - c.lr * c.weight_decay);
  s.eps = static_cast<float>(c.eps);
  if (!param.is_host()) return SEXTANT_CUDA_CALL(cuda::adam_step(param, grad, exp_avg, exp_avg_sq, s));
  HostIn<float> g(grad);
  adam_update_f32(param.numel(), param.data<float>(), g.get(), exp_avg.data<float>(), exp_avg_sq.data<float>(), s);
}

}  // namespace sextant::ops
