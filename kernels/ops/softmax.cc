#include "kernels/ops/softmax.h"

#include "harness/kernel_fault.h"
#include "harness/op_times.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/ops/host_common.h"
#include "kernels/ops/op_names.h"
#include "kernels/ops/simd.h"
#include "kernels/ops/vector_math.h"

namespace sextant::ops {

namespace {

// x, y: [rows, n].
template <class F>
void softmax_rows(int64_t rows, int64_t n, const F* x, F* y) {
  run_simd([&](auto lanes) SEXTANT_INLINE_LAMBDA {
    for (int64_t r = 0; r < rows; ++r) {
      const F* xr = x + r * n;
      F* yr = y + r * n;
      const F max = lane_max(xr, n);
      map_lanes<decltype(lanes)::value, F>(
          n, yr, [max](auto v) SEXTANT_INLINE_LAMBDA { return vexp(v - max); }, xr);
      const F inv_sum = F(1) / lane_sum<F>(n, [&](int64_t j) { return yr[j]; });
      for (int64_t j = 0; j < n; ++j) yr[j] *= inv_sum;
    }
  });
}

// dy, y, dx: [rows, n]; dx = y (dy - <dy, y>) per row.
template <class F>
void softmax_backward_rows(int64_t rows, int64_t n, const F* dy, const F* y, F* dx) {
  const bool no_dot = kernel_fault_planted(KernelFault::softmax_backward);
  run_simd([&](auto) SEXTANT_INLINE_LAMBDA {
    for (int64_t r = 0; r < rows; ++r) {
      const F* dyr = dy + r * n;
      const F* yr = y + r * n;
      F* dxr = dx + r * n;
      const F dot = no_dot ? F(0) : lane_sum<F>(n, [&](int64_t j) { return dyr[j] * yr[j]; });
      for (int64_t j = 0; j < n; ++j) dxr[j] = yr[j] * (dyr[j] - dot);
    }
  });
}

}  // namespace

void softmax_forward(const Tensor& x, Tensor& y) {
  OpTimer timer(timed::kSoftmax, x.device());
  require_one_device("softmax_forward", {{"x", &x}, {"y", &y}});
  require_rows("softmax_forward", "x", x);
  require_shape("softmax_forward", "y", y, x.shape());
  if (x.dim(-1) == 0) return;
  if (!x.is_host()) return SEXTANT_CUDA_CALL(cuda::softmax_forward(x, y));
  with_compute_type(x.dtype(), [&](auto tag) {
    using F = decltype(tag);
    HostIn<F> x_in(x);
    HostOut<F> y_out(y);
    softmax_rows<F>(rows_of(x), x.dim(-1), x_in.get(), y_out.get());
    y_out.store();
  });
}

void softmax_backward(const Tensor& dy, const Tensor& y, Tensor& dx) {
  OpTimer timer(timed::kSoftmax, y.device());
  require_one_device("softmax_backward", {{"dy", &dy}, {"y", &y}, {"dx", &dx}});
  require_rows("softmax_backward", "y", y);
  require_shape("softmax_backward", "dy", dy, y.shape());
  require_shape("softmax_backward", "dx", dx, y.shape());
  if (!y.is_host()) return SEXTANT_CUDA_CALL(cuda::softmax_backward(dy, y, dx));
  with_compute_type(y.dtype(), [&](auto tag) {
    using F = decltype(tag);
    HostIn<F> dy_in(dy), y_in(y);
    HostOut<F> dx_out(dx);
    softmax_backward_rows<F>(rows_of(y), y.dim(-1), dy_in.get(), y_in.get(), dx_out.get());
    dx_out.store();
  });
}

}  // namespace sextant::ops
