// Cross-entropy's row kernels on the GPU (cross_entropy.cc): per row the
// max, the sum of exponentials shifted by it, the target's logit, the loss,
// and the backward, reading and writing 16-byte vectors where the row is a
// whole number of them; one block per row.
#include <optional>
#include <type_traits>

#include "kernels/ops/cross_entropy.h"
#include "kernels/ops/cuda/device_common.cuh"
#include "kernels/ops/cuda/rows_common.cuh"
#include "kernels/ops/cuda_ops.h"

namespace sextant::ops::cuda {

namespace {

// The cross-entropy row kernels read a row in 16-byte vectors when `vec`
// (the row a whole number of vectors, 16-byte aligned), else one by one.
template <class T>
__global__ void row_max_kernel(const T* x, compute_t<T>* out, int64_t n, bool vec) {
  using F = compute_t<T>;
  using V = Vec16<T>;
  __shared__ F scratch[32];
  const T* row = x + blockIdx.x * n;
  F m = -INFINITY;
  if (vec) {
    for (int64_t c = threadIdx.x; c < n / V::kWidth; c += blockDim.x) {
      const V a = V::load(row, c);
#pragma unroll
      for (int j = 0; j < V::kWidth; ++j) m = nan_max(m, a.v[j]);
    }
  } else {
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = nan_max(m, F(widen(row[j])));
  }
  m = block_max(m, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = m;
}

template <class T>
__global__ void sum_exp_kernel(const T* x, const compute_t<T>* max, compute_t<T>* out, int64_t n, bool vec) {
  using F = compute_t<T>;
  using V = Vec16<T>;
  __shared__ F scratch[32];
  const T* row = x + blockIdx.x * n;
  const F m = max[blockIdx.x];
  F sum = 0;
  if (vec) {
    for (int64_t c = threadIdx.x; c < n / V::kWidth; c += blockDim.x) {
      const V a = V::load(row, c);
#pragma unroll
      for (int j = 0; j < V::kWidth; ++j) sum += exp_of(a.v[j] - m);
    }
  } else {
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += exp_of(widen(row[j]) - m);
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

template <class T>
__global__ void target_logit_kernel(const T* x, const int64_t* targets, int64_t vocab_start, compute_t<T>* out,
                                    int64_t rows, int64_t n) {
  for (int64_t r = global_thread(); r < rows; r += grid_threads()) {
    const int64_t local = targets[r] - vocab_start;
    out[r] = (local >= 0 && local < n) ? compute_t<T>(widen(x[r * n + local])) : compute_t<T>(0);
  }
}

// targets: null, or per row (kIgnoreTarget: the row's loss is 0).
template <class F>
__global__ void row_loss_kernel(const F* max, const F* sum_exp, const F* target, const int64_t* targets, F* out,
                                int64_t rows) {
  for (int64_t r = global_thread(); r < rows; r += grid_threads())
    out[r] = targets && targets[r] == kIgnoreTarget ? F(0) : log_of(sum_exp[r]) + max[r] - target[r];
}

// dx = (w / sum_exp) exp(x - max), minus w at the target where it lies in
// this slice; 0 on a row whose target is kIgnoreTarget.
template <class T>
__global__ void cross_entropy_backward_kernel(const T* x, const int64_t* targets, const compute_t<T>* max,
                                              const compute_t<T>* sum_exp, compute_t<T> w, T* dx, int64_t n,
                                              int64_t vocab_start, bool vec) {
  using F = compute_t<T>;
  using V = Vec16<T>;
  const int64_t r = blockIdx.x;
  const bool ignored = targets[r] == kIgnoreTarget;
  const F m = max[r], scale = ignored ? F(0) : w / sum_exp[r];
  const int64_t local = ignored ? -1 : targets[r] - vocab_start;
  if (vec) {
    for (int64_t c = threadIdx.x; c < n / V::kWidth; c += blockDim.x) {
      V a = V::load(x + r * n, c);
#pragma unroll
      for (int j = 0; j < V::kWidth; ++j) {
        a.v[j] = scale * exp_of(a.v[j] - m);
        if (c * V::kWidth + j == local) a.v[j] -= w;
      }
      a.store(dx + r * n, c);
    }
    return;
  }
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    F v = scale * exp_of(widen(x[r * n + j]) - m);
    if (j == local) v -= w;
    dx[r * n + j] = narrow_to<T>(v);
  }
}

}  // namespace

void cross_entropy_row_max(const Tensor& logits, Tensor& out) {
  const int64_t rows = rows_of(logits), n = logits.dim(-1);
  if (rows == 0) return;
  with_storage(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool vec = row_vectors<T>(n, {logits.raw()});
    row_max_kernel<T><<<rows_grid(rows), row_vector_threads<T>(n, vec), 0, compute_stream()>>>(
        ptr<T>(logits), ptr<compute_t<T>>(out), n, vec);
    SEXTANT_CHECK_LAUNCH("cross_entropy_row_max");
  });
}

void cross_entropy_sum_exp(const Tensor& logits, const Tensor& row_max, Tensor& out) {
  const int64_t rows = rows_of(logits), n = logits.dim(-1);
  if (rows == 0) return;
  with_storage(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using F = compute_t<T>;
    const Tensor m = as_dtype(row_max, dtype_of<F>());
    const bool vec = row_vectors<T>(n, {logits.raw()});
    sum_exp_kernel<T><<<rows_grid(rows), row_vector_threads<T>(n, vec), 0, compute_stream()>>>(
        ptr<T>(logits), ptr<F>(m), ptr<F>(out), n, vec);
    SEXTANT_CHECK_LAUNCH("cross_entropy_sum_exp");
  });
}

void cross_entropy_target_logit(const Tensor& logits, std::span<const int64_t> targets, int64_t vocab_start,
                                Tensor& out) {
  const int64_t rows = rows_of(logits), n = logits.dim(-1);
  if (rows == 0) return;
  const DeviceIds device_targets(targets);
  with_storage(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    target_logit_kernel<T><<<grid_for(rows, 256), 256, 0, compute_stream()>>>(
        ptr<T>(logits), device_targets.get(), vocab_start, ptr<compute_t<T>>(out), rows, n);
    SEXTANT_CHECK_LAUNCH("cross_entropy_target_logit");
  });
}

void cross_entropy_row_loss(const Tensor& max, const Tensor& sum_exp, const Tensor& target_logit,
                            std::span<const int64_t> targets, Tensor& out) {
  const int64_t rows = out.numel();
  if (rows == 0) return;
  const std::optional<DeviceIds> device_targets =
      targets.empty() ? std::nullopt : std::optional<DeviceIds>(std::in_place, targets);
  with_storage(out.dtype(), [&](auto tag) {
    using F = decltype(tag);
    const Tensor m = as_dtype(max, out.dtype()), s = as_dtype(sum_exp, out.dtype()),
                 t = as_dtype(target_logit, out.dtype());
    if constexpr (std::is_same_v<F, float> || std::is_same_v<F, double>) {
      row_loss_kernel<F><<<grid_for(rows, 256), 256, 0, compute_stream()>>>(
          ptr<F>(m), ptr<F>(s), ptr<F>(t), device_targets ? device_targets->get() : nullptr, ptr<F>(out), rows);
      SEXTANT_CHECK_LAUNCH("cross_entropy_row_loss");
    } else {
      throw RuntimeError("cross_entropy_row_loss: the row losses are f32 or f64");
    }
  });
}

void cross_entropy_backward(const Tensor& logits, std::span<const int64_t> targets, const Tensor& max,
                            const Tensor& sum_exp, double w, Tensor& dlogits, int64_t vocab_start) {
  require_dtype("cross_entropy_backward", "dlogits", dlogits, logits.dtype());
  const int64_t rows = rows_of(logits), n = logits.dim(-1);
  if (rows == 0) return;
  const DeviceIds device_targets(targets);
  with_storage(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using F = compute_t<T>;
    const Tensor m = as_dtype(max, dtype_of<F>()), s = as_dtype(sum_exp, dtype_of<F>());
    const bool vec = row_vectors<T>(n, {logits.raw(), dlogits.raw()});
    cross_entropy_backward_kernel<T><<<rows_grid(rows), row_vector_threads<T>(n, vec), 0, compute_stream()>>>(
        ptr<T>(logits), device_targets.get(), ptr<F>(m), ptr<F>(s), F(w), ptr<T>(dlogits), n, vocab_start, vec);
    SEXTANT_CHECK_LAUNCH("cross_entropy_backward");
  });
}

}  // namespace sextant::ops::cuda
