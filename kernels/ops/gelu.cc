#include "kernels/ops/gelu.h"

#include "harness/kernel_fault.h"
#include "harness/op_times.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/ops/host_common.h"
#include "kernels/ops/op_names.h"
#include "kernels/ops/simd.h"
#include "kernels/ops/vector_math.h"

namespace sextant::ops {

namespace {

// V is an f32 lane vector (f32 compute) or a double; S its scalar type.
template <class S>
constexpr S kSqrt2OverPi = S(0.7978845608028654);
template <class S>
constexpr S kCubic = S(0.044715);

// e^{-2u}, u = sqrt(2/pi) (x + 0.044715 x^3), so that
// 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + e^{-2u}).
template <class S, class V>
SEXTANT_ALWAYS_INLINE V exp_minus_2u(V x) {
  return vexp(S(-2) * kSqrt2OverPi<S> * (x + kCubic<S> * x * x * x));
}

// x, y: [n]. F = float runs on lane vectors (simd.h), F = double on scalars.
template <class F>
void gelu_forward_loop(int64_t n, const F* x, F* y) {
  run_simd([&](auto lanes) SEXTANT_INLINE_LAMBDA {
    map_lanes<decltype(lanes)::value, F>(
        n, y, [](auto xi) SEXTANT_INLINE_LAMBDA { return xi / (F(1) + exp_minus_2u<F>(xi)); }, x);
  });
}

// With s = sigmoid(2u) = 1 / (1 + e): d/dx [x s] = s + 2 x s (1 - s) du/dx,
// du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2). 1 - s is taken as e s, not by
// subtraction: for large x, s rounds to 1 while x du/dx grows like x^3.
template <class F>
void gelu_backward_loop(int64_t n, const F* dy, const F* x, F* dx) {
  const F cubic_slope = kernel_fault_planted(KernelFault::gelu_backward_coefficient) ? kCubic<F> : F(3) * kCubic<F>;
  run_simd([&](auto lanes) SEXTANT_INLINE_LAMBDA {
    map_lanes<decltype(lanes)::value, F>(
        n, dx,
        [cubic_slope](auto dyi, auto xi) SEXTANT_INLINE_LAMBDA {
          const auto e = exp_minus_2u<F>(xi);
          const auto s = F(1) / (F(1) + e);
          const auto du = kSqrt2OverPi<F> * (F(1) + cubic_slope * xi * xi);
          return dyi * (s + F(2) * xi * s * (e * s) * du);
        },
        dy, x);
  });
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  OpTimer timer(timed::kGelu, x.device());
  require_one_device("gelu_forward", {{"x", &x}, {"y", &y}});
  require_shape("gelu_forward", "y", y, x.shape());
  if (!x.is_host()) return SEXTANT_CUDA_CALL(cuda::gelu_forward(x, y));
  with_compute_type(x.dtype(), [&](auto tag) {
    using F = decltype(tag);
    HostIn<F> x_in(x);
    HostOut<F> y_out(y);
    gelu_forward_loop<F>(x.numel(), x_in.get(), y_out.get());
    y_out.store();
  });
}

void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  OpTimer timer(timed::kGelu, x.device());
  require_one_device("gelu_backward", {{"dy", &dy}, {"x", &x}, {"dx", &dx}});
  require_shape("gelu_backward", "dy", dy, x.shape());
  require_shape("gelu_backward", "dx", dx, x.shape());
  if (!x.is_host()) return SEXTANT_CUDA_CALL(cuda::gelu_backward(dy, x, dx));
  with_compute_type(x.dtype(), [&](auto tag) {
    using F = decltype(tag);
    HostIn<F> dy_in(dy), x_in(x);
    HostOut<F> dx_out(dx);
    gelu_backward_loop<F>(x.numel(), dy_in.get(), x_in.get(), dx_out.get());
    dx_out.store();
  });
}

}  // namespace sextant::ops
