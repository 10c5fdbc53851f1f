#include "kernels/ops/bias.h"

#include <algorithm>
#include <vector>

#include "harness/op_times.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/ops/host_common.h"
#include "kernels/ops/op_names.h"
#include "kernels/ops/simd.h"

namespace sextant::ops {

namespace {

// x, y: [rows, n]; bias: [n]. run_simd compiles the loops per ISA level.
template <class F>
void bias_add_rows(int64_t rows, int64_t n, const F* x, const F* b, F* y) {
  run_simd([&](auto) SEXTANT_INLINE_LAMBDA {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) y[r * n + j] = x[r * n + j] + b[j];
  });
}
// Column sums, row by row: contiguous, vectorizable adds. sums: [n], zeroed by the caller.
template <class F>
void column_sums(int64_t rows, int64_t n, const F* dy, F* sums) {
  run_simd([&](auto) SEXTANT_INLINE_LAMBDA {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) sums[j] += dy[r * n + j];
  });
}

}  // namespace

void bias_add(const Tensor& x, const Tensor& bias, Tensor& y) {
  OpTimer timer(timed::kBias, x.device());
  const char* op = "bias_add";
  require_one_device(op, {{"x", &x}, {"bias", &bias}, {"y", &y}});
  require_rows(op, "x", x);
  require_shape(op, "bias", bias, {x.dim(-1)});
  require_shape(op, "y", y, x.shape());
  if (!x.is_host()) return SEXTANT_CUDA_CALL(cuda::bias_add(x, bias, y));
  const int64_t rows = rows_of(x), n = x.dim(-1);
  with_compute_type(x.dtype(), [&](auto tag) {
    using F = decltype(tag);
    HostIn<F> x_in(x), b_in(bias);
    HostOut<F> y_out(y);
    bias_add_rows<F>(rows, n, x_in.get(), b_in.get(), y_out.get());
    y_out.store();
  });
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  OpTimer timer(timed::kBias, dy.device());
  const char* op = "bias_backward";
  require_one_device(op, {{"dy", &dy}, {"dbias", &dbias}});
  require_rows(op, "dy", dy);
  require_shape(op, "dbias", dbias, {dy.dim(-1)});
  if (!dy.is_host()) return SEXTANT_CUDA_CALL(cuda::bias_backward(dy, dbias));
  const int64_t rows = rows_of(dy), n = dy.dim(-1);
  with_compute_type(dy.dtype(), [&](auto tag) {
    using F = decltype(tag);
    HostIn<F> dy_in(dy);
    std::vector<F> sums(n, F(0));  // compute-type sums, rounded once below
    column_sums<F>(rows, n, dy_in.get(), sums.data());
    HostOut<F> db(dbias);
    std::copy(sums.begin(), sums.end(), db.get());
    db.store();
  });
}

}  // namespace sextant::ops
