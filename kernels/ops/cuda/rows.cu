// Row-wise ops on the GPU: LayerNorm, softmax, and the column sums behind
// the bias and LayerNorm parameter gradients (cross-entropy's row kernels:
// cross_entropy.cu).
//
// LayerNorm forward keeps a row of up to 4 x 16 bytes per thread in registers
// and moves it in 16-byte vectors; otherwise one block per row (row_threads: a warp
// for short rows, up to 256 threads),
// the row's statistics by block reductions in the compute type, the same
// formulas as the host ops (two-pass LayerNorm statistics, softmax shifted
// by the row max). A LayerNorm / softmax row that fits
// 40 KiB of shared memory is read from global memory once and kept there.
//
// Column sums (bias_backward, dgamma / dbeta) are deterministic: each block
// sums a fixed range of rows for 32 columns into a partial, and a second
// kernel adds the partials in order (no atomics), so a result never depends
// on scheduling.
#include <algorithm>

#include "kernels/ops/cuda/device_common.cuh"
#include "kernels/ops/cuda/rows_common.cuh"
#include "kernels/ops/cuda_ops.h"

namespace sextant::ops::cuda {

namespace {

constexpr size_t kRowCacheBytes = 40 * 1024;  // under the 48 KiB a block gets without opting in

// One row of n storage elements, widened; kept in shared memory when the
// launch gave it room (cache != nullptr), else re-read from global memory.
template <class T>
struct Row {
  const T* x;
  compute_t<T>* cache;
  __device__ compute_t<T> load_first(int64_t j) const {  // the first pass fills the cache
    const compute_t<T> v = widen(x[j]);
    if (cache) cache[j] = v;
    return v;
  }
  __device__ compute_t<T> operator[](int64_t j) const { return cache ? cache[j] : widen(x[j]); }
};

template <class F>
__device__ F* row_cache(bool cached) {
  extern __shared__ __align__(16) unsigned char row_smem[];
  return cached ? reinterpret_cast<F*>(row_smem) : nullptr;
}

// y = (x - mean) rstd gamma + beta, two-pass statistics (layernorm.cc).
template <class T>
__global__ void layernorm_forward_kernel(const T* x, const compute_t<T>* gamma, const compute_t<T>* beta, T* y,
                                         compute_t<T>* mean, compute_t<T>* rstd, int64_t h, compute_t<T> eps,
                                         bool cached) {
  using F = compute_t<T>;
  __shared__ F scratch[32];
  const int64_t r = blockIdx.x;
  const Row<T> row{x + r * h, row_cache<F>(cached)};
  F sum = 0;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) sum += row.load_first(j);
  const F m = block_sum(sum, scratch) / F(h);
  F squares = 0;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) squares += (row[j] - m) * (row[j] - m);
  const F rs = F(1) / sqrt(block_sum(squares, scratch) / F(h) + eps);
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x)
    y[r * h + j] = narrow_to<T>((row[j] - m) * rs * gamma[j] + beta[j]);
  if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
}

// The same LayerNorm for rows that fit in registers, at copy speed: the row
// is read once in 16-byte vectors (8 bf16 / f16 or 4 f32 values), kept in
// registers through both statistics passes, and written in 16-byte vectors.
// Thread t holds vectors t, t + blockDim.x, ... (coalesced), at most kVecs.
constexpr int kVecs = 4;

template <class T>
__global__ void __launch_bounds__(1024)
    layernorm_forward_vec_kernel(const T* x, const float* gamma, const float* beta, T* y, float* mean, float* rstd,
                                 int64_t h, float eps) {
  constexpr int kWidth = 16 / sizeof(T);
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, vecs = h / kWidth;
  const uint4* xr = reinterpret_cast<const uint4*>(x + r * h);
  float v[kVecs][kWidth];
  float sum = 0;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (c >= vecs) continue;
    const uint4 raw = xr[c];
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) v[i][j] = widen(e[j]), sum += v[i][j];
  }
  const float m = block_sum(sum, scratch) / float(h);
  float squares = 0;
#pragma unroll
  for (int i = 0; i < kVecs; ++i)
    if (threadIdx.x + static_cast<int64_t>(i) * blockDim.x < vecs)
#pragma unroll
      for (int j = 0; j < kWidth; ++j) squares += (v[i][j] - m) * (v[i][j] - m);
  const float rs = 1.0f / sqrt(block_sum(squares, scratch) / float(h) + eps);
  uint4* yr = reinterpret_cast<uint4*>(y + r * h);
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (c >= vecs) continue;
    uint4 raw;
    T* o = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < kWidth; ++j)
      o[j] = narrow_to<T>((v[i][j] - m) * rs * gamma[c * kWidth + j] + beta[c * kWidth + j]);
    yr[c] = raw;
  }
  if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
}

// Threads for the vector kernel (a multiple of 32, at most 1024), or 0 when
// the row does not fit: 16-bit or f32 storage, h a whole number of vectors,
// at most kVecs of them per thread.
template <class T>
int vec_threads(int64_t h) {
  if constexpr (std::is_same_v<T, double>) return 0;
  else {
    constexpr int64_t width = 16 / sizeof(T);
    if (h % width != 0) return 0;
    const int64_t threads = (h / width + kVecs - 1) / kVecs;
    if (threads > 1024) return 0;
    return static_cast<int>(std::max<int64_t>(32, (threads + 31) / 32 * 32));
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma (layernorm.cc).
template <class T>
__global__ void layernorm_backward_kernel(const T* dy, const T* x, const compute_t<T>* gamma, const compute_t<T>* mean,
                                          const compute_t<T>* rstd, T* dx, int64_t h) {
  using F = compute_t<T>;
  __shared__ F scratch[32];
  const int64_t r = blockIdx.x;
  const T *dyr = dy + r * h, *xr = x + r * h;
  const F m = mean[r], rs = rstd[r];
  F g_sum = 0, gx_sum = 0;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const F g = widen(dyr[j]) * gamma[j];
    g_sum += g;
    gx_sum += g * ((widen(xr[j]) - m) * rs);
  }
  const F g_mean = block_sum(g_sum, scratch) / F(h);
  const F gx_mean = block_sum(gx_sum, scratch) / F(h);
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const F xhat = (widen(xr[j]) - m) * rs;
    dx[r * h + j] = narrow_to<T>(rs * (widen(dyr[j]) * gamma[j] - g_mean - xhat * gx_mean));
  }
}

// Column sums: block (32 columns, 8 row lanes) over rows [split * per, ...).
// partial: [splits, N, n] in F.
template <class F, int N, class Term>
__global__ void column_partials_kernel(int64_t rows, int64_t n, int64_t rows_per_split, Term term, F* partial) {
  __shared__ F lanes[N][8][33];
  const int64_t j = blockIdx.x * 32 + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows_per_split, r1 = min(rows, r0 + rows_per_split);
  F acc[N] = {};
  if (j < n)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) term(r, j, acc);
  for (int k = 0; k < N; ++k) lanes[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && j < n)
    for (int k = 0; k < N; ++k) {
      F total = 0;
      for (int y = 0; y < 8; ++y) total += lanes[k][y][threadIdx.x];
      partial[(static_cast<int64_t>(blockIdx.y) * N + k) * n + j] = total;
    }
}

// totals [N, n] = sum over the splits of partial [splits, N, n], in split order.
template <class F>
__global__ void column_totals_kernel(const F* partial, int64_t splits, int64_t count, F* totals) {
  for (int64_t i = global_thread(); i < count; i += grid_threads()) {
    F total = 0;
    for (int64_t s = 0; s < splits; ++s) total += partial[s * count + i];
    totals[i] = total;
  }
}

// Sums term(r, j, acc) over the rows into totals: [N, n] F on the device.
template <class F, int N, class Term>
void column_sums(int64_t rows, int64_t n, const Term& term, Tensor& totals) {
  if (n == 0) return;
  const int64_t splits = std::clamp<int64_t>((rows + 63) / 64, 1, 256);
  const int64_t per = (rows + splits - 1) / splits;
  Scratch partial(static_cast<size_t>(splits * N * n) * sizeof(F));
  const dim3 grid(static_cast<unsigned>((n + 31) / 32), static_cast<unsigned>(splits));
  column_partials_kernel<F, N, Term>
      <<<grid, dim3(32, 8), 0, compute_stream()>>>(rows, n, per, term, static_cast<F*>(partial.get()));
  SEXTANT_CHECK_LAUNCH("column_partials_kernel");
  column_totals_kernel<F><<<grid_for(N * n, 256), 256, 0, compute_stream()>>>(static_cast<const F*>(partial.get()),
                                                                              splits, N * n, ptr<F>(totals));
  SEXTANT_CHECK_LAUNCH("column_totals_kernel");
}

template <class T>
struct BiasTerm {
  const T* dy;
  int64_t n;
  __device__ void operator()(int64_t r, int64_t j, compute_t<T>* acc) const { acc[0] += widen(dy[r * n + j]); }
};

template <class T>
struct LayerNormParamTerm {  // dgamma += dy xhat, dbeta += dy
  const T *dy, *x;
  const compute_t<T>*mean, *rstd;
  int64_t h;
  __device__ void operator()(int64_t r, int64_t j, compute_t<T>* acc) const {
    const compute_t<T> d = widen(dy[r * h + j]);
    acc[0] += d * ((widen(x[r * h + j]) - mean[r]) * rstd[r]);
    acc[1] += d;
  }
};

// y = exp(x - max) / sum exp(x - max) per row (softmax.cc).
template <class T>
__global__ void softmax_forward_kernel(const T* x, T* y, int64_t n, bool cached) {
  using F = compute_t<T>;
  __shared__ F scratch[32];
  const int64_t r = blockIdx.x;
  const Row<T> row{x + r * n, row_cache<F>(cached)};
  F m = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = nan_max(m, row.load_first(j));
  m = block_max(m, scratch);
  F sum = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += exp_of(row[j] - m);
  const F inv_sum = F(1) / block_sum(sum, scratch);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) y[r * n + j] = narrow_to<T>(exp_of(row[j] - m) * inv_sum);
}

// dx = y (dy - <dy, y>) per row.
template <class T>
__global__ void softmax_backward_kernel(const T* dy, const T* y, T* dx, int64_t n) {
  using F = compute_t<T>;
  __shared__ F scratch[32];
  const int64_t r = blockIdx.x;
  F dot = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += widen(dy[r * n + j]) * widen(y[r * n + j]);
  dot = block_sum(dot, scratch);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    dx[r * n + j] = narrow_to<T>(widen(y[r * n + j]) * (widen(dy[r * n + j]) - dot));
}

// Shared memory for a row cache of n compute values, 0 when it would not fit.
template <class F>
size_t cache_bytes(int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(F);
  return bytes <= kRowCacheBytes ? bytes : 0;
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, float eps, Tensor& mean,
                       Tensor& rstd) {
  require_dtype("layernorm_forward", "y", y, x.dtype());
  const int64_t rows = rows_of(x), h = x.dim(-1);
  if (rows == 0 || h == 0) return;
  with_storage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using F = compute_t<T>;
    const Tensor g = as_dtype(gamma, dtype_of<F>()), b = as_dtype(beta, dtype_of<F>());
    if constexpr (!std::is_same_v<T, double>) {
      if (const int threads = vec_threads<T>(h)) {
        layernorm_forward_vec_kernel<T><<<rows_grid(rows), threads, 0, compute_stream()>>>(
            ptr<T>(x), ptr<F>(g), ptr<F>(b), ptr<T>(y), ptr<F>(mean), ptr<F>(rstd), h, F(eps));
        SEXTANT_CHECK_LAUNCH("layernorm_forward");
        return;
      }
    }
    const size_t smem = cache_bytes<F>(h);
    layernorm_forward_kernel<T><<<rows_grid(rows), row_threads(h), smem, compute_stream()>>>(
        ptr<T>(x), ptr<F>(g), ptr<F>(b), ptr<T>(y), ptr<F>(mean), ptr<F>(rstd), h, F(eps), smem > 0);
    SEXTANT_CHECK_LAUNCH("layernorm_forward");
  });
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                        Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  require_dtype("layernorm_backward", "dy", dy, x.dtype());
  require_dtype("layernorm_backward", "dx", dx, x.dtype());
  const int64_t rows = rows_of(x), h = x.dim(-1);
  with_storage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using F = compute_t<T>;
    const Tensor g = as_dtype(gamma, dtype_of<F>());
    if (rows > 0 && h > 0) {
      layernorm_backward_kernel<T><<<rows_grid(rows), row_threads(h), 0, compute_stream()>>>(
          ptr<T>(dy), ptr<T>(x), ptr<F>(g), ptr<F>(mean), ptr<F>(rstd), ptr<T>(dx), h);
      SEXTANT_CHECK_LAUNCH("layernorm_backward");
    }
    Tensor totals = Tensor::empty({2, h}, dtype_of<F>(), Device::cuda);  // [dgamma; dbeta], rounded once below
    column_sums<F, 2>(rows, h, LayerNormParamTerm<T>{ptr<T>(dy), ptr<T>(x), ptr<F>(mean), ptr<F>(rstd), h}, totals);
    dgamma.copy_from(as_dtype(narrow(totals, 0, 0, 1).reshape({h}), dgamma.dtype()));
    dbeta.copy_from(as_dtype(narrow(totals, 0, 1, 1).reshape({h}), dbeta.dtype()));
  });
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  const int64_t n = dy.dim(-1), rows = rows_of(dy);
  with_storage(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using F = compute_t<T>;
    Tensor totals = Tensor::empty({1, n}, dtype_of<F>(), Device::cuda);
    column_sums<F, 1>(rows, n, BiasTerm<T>{ptr<T>(dy), n}, totals);
    dbias.copy_from(as_dtype(totals.reshape({n}), dbias.dtype()));
  });
}

void softmax_forward(const Tensor& x, Tensor& y) {
  require_dtype("softmax_forward", "y", y, x.dtype());
  const int64_t rows = rows_of(x), n = x.dim(-1);
  if (rows == 0 || n == 0) return;
  with_storage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const size_t smem = cache_bytes<compute_t<T>>(n);
    softmax_forward_kernel<T>
        <<<rows_grid(rows), row_threads(n), smem, compute_stream()>>>(ptr<T>(x), ptr<T>(y), n, smem > 0);
    SEXTANT_CHECK_LAUNCH("softmax_forward");
  });
}

void softmax_backward(const Tensor& dy, const Tensor& y, Tensor& dx) {
  require_dtype("softmax_backward", "dy", dy, y.dtype());
  require_dtype("softmax_backward", "dx", dx, y.dtype());
  const int64_t rows = rows_of(y), n = y.dim(-1);
  if (rows == 0 || n == 0) return;
  with_storage(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    softmax_backward_kernel<T>
        <<<rows_grid(rows), row_threads(n), 0, compute_stream()>>>(ptr<T>(dy), ptr<T>(y), ptr<T>(dx), n);
    SEXTANT_CHECK_LAUNCH("softmax_backward");
  });
}

}  // namespace sextant::ops::cuda
