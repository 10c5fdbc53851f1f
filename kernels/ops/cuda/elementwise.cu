// Element-wise ops on the GPU: GELU, bias add, Adam, and the helpers the
// parallel kernels' device paths use (add_into, mul_add, permute_rows, the
// embedding gather / scatter-add). Grid-stride loops; GELU, bias, Adam and
// add_into move 16-byte vectors (Vec16), the others one element per thread.
//
// Same formulas as the host ops, term for term (gelu.cc, adam.cc); GELU uses
// expf where the host uses its own vexp, within a few ulp of each other, and
// either side may fuse a multiply-add (the host's AVX2 / AVX-512 clones do),
// so results agree to rounding, not bit for bit. mul_add spells its two
// roundings out (__fmul_rn, __fadd_rn), as the suites' portable host loop
// computes them.
#include <algorithm>

#include "kernels/ops/cuda/device_common.cuh"
#include "kernels/ops/cuda_ops.h"

namespace sextant::ops::cuda {

namespace {

constexpr int kThreads = 256;

// e^{-2u}, u = sqrt(2/pi) (x + 0.044715 x^3): gelu(x) = x / (1 + e^{-2u}) (gelu.cc).
template <class F>
__device__ __forceinline__ F exp_minus_2u(F x) {
  const F c = F(-2) * F(0.7978845608028654);
  return exp_of<F>(c * (x + F(0.044715) * x * x * x));
}

template <class F>
__device__ __forceinline__ F gelu_of(F x) {
  return x / (F(1) + exp_minus_2u<F>(x));
}

// d/dx [x s] = s + 2 x s (1 - s) du/dx with s = sigmoid(2u), 1 - s = e s (gelu.cc).
template <class F>
__device__ __forceinline__ F gelu_grad_of(F dy, F x) {
  const F e = exp_minus_2u<F>(x);
  const F s = F(1) / (F(1) + e);
  const F du = F(0.7978845608028654) * (F(1) + F(3) * F(0.044715) * x * x);
  return dy * (s + F(2) * x * s * (e * s) * du);
}

// Each element-wise kernel moves `vecs` whole 16-byte vectors (vectors_of),
// then the elements past them one by one.
template <class T>
__global__ void gelu_forward_kernel(const T* x, T* y, int64_t n, int64_t vecs) {
  using V = Vec16<T>;
  for (int64_t i = global_thread(); i < vecs; i += grid_threads()) {
    V a = V::load(x, i);
#pragma unroll
    for (int j = 0; j < V::kWidth; ++j) a.v[j] = gelu_of(a.v[j]);
    a.store(y, i);
  }
  for (int64_t i = vecs * V::kWidth + global_thread(); i < n; i += grid_threads())
    y[i] = narrow_to<T>(gelu_of(widen(x[i])));
}

template <class T>
__global__ void gelu_backward_kernel(const T* dy, const T* x, T* dx, int64_t n, int64_t vecs) {
  using V = Vec16<T>;
  for (int64_t i = global_thread(); i < vecs; i += grid_threads()) {
    V g = V::load(dy, i);
    const V a = V::load(x, i);
#pragma unroll
    for (int j = 0; j < V::kWidth; ++j) g.v[j] = gelu_grad_of(g.v[j], a.v[j]);
    g.store(dx, i);
  }
  for (int64_t i = vecs * V::kWidth + global_thread(); i < n; i += grid_threads())
    dx[i] = narrow_to<T>(gelu_grad_of(widen(dy[i]), widen(x[i])));
}

// bias: [n] already in the compute type.
template <class T>
__global__ void bias_add_kernel(const T* x, const compute_t<T>* bias, T* y, int64_t count, int64_t n, int64_t vecs) {
  using V = Vec16<T>;
  for (int64_t i = global_thread(); i < vecs; i += grid_threads()) {
    V a = V::load(x, i);
#pragma unroll
    for (int j = 0; j < V::kWidth; ++j) a.v[j] += bias[(i * V::kWidth + j) % n];
    a.store(y, i);
  }
  for (int64_t i = vecs * V::kWidth + global_thread(); i < count; i += grid_threads())
    y[i] = narrow_to<T>(widen(x[i]) + bias[i % n]);
}

template <class T>
__global__ void add_into_kernel(T* y, const T* x, int64_t n, int64_t vecs) {
  using V = Vec16<T>;
  for (int64_t i = global_thread(); i < vecs; i += grid_threads()) {
    V a = V::load(y, i);
    const V b = V::load(x, i);
#pragma unroll
    for (int j = 0; j < V::kWidth; ++j) a.v[j] += b.v[j];
    a.store(y, i);
  }
  for (int64_t i = vecs * V::kWidth + global_thread(); i < n; i += grid_threads())
    y[i] = narrow_to<T>(widen(y[i]) + widen(x[i]));
}

__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

template <class T>
__global__ void mul_add_kernel(const T* a, const T* b, const T* c, T* out, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    auto v = mul_rn(widen(a[i]), widen(b[i]));
    if (c) v = add_rn(v, widen(c[i]));
    out[i] = narrow_to<T>(v);
  }
}

// adam.cc's adam_update_f32 on one element of (p, g, m, v).
__device__ __forceinline__ void adam_update(float& p, float g, float& m, float& v, const AdamScalars& s) {
  const float mi = s.beta1 * m + s.one_minus_beta1 * g;
  const float vi = s.beta2 * v + s.one_minus_beta2 * g * g;
  const float denom = sqrtf(vi) * s.inv_sqrt_bc2 + s.eps;
  p = p * s.decay - s.step_size * mi / denom;
  m = mi;
  v = vi;
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, int64_t vecs, AdamScalars s) {
  using V = Vec16<float>;
  for (int64_t i = global_thread(); i < vecs; i += grid_threads()) {
    V pv = V::load(p, i), mv = V::load(m, i), vv = V::load(v, i);
    const V gv = V::load(g, i);
#pragma unroll
    for (int j = 0; j < V::kWidth; ++j) adam_update(pv.v[j], gv.v[j], mv.v[j], vv.v[j], s);
    pv.store(p, i), mv.store(m, i), vv.store(v, i);
  }
  for (int64_t i = vecs * V::kWidth + global_thread(); i < n; i += grid_threads())
    adam_update(p[i], g[i], m[i], v[i], s);
}

// permute_rows: the view's dims (innermost last), and for each output dim the
// stride of the view dim it takes, in elements.
constexpr int kMaxDims = 8;
struct PermuteLayout {
  int nd = 0;
  int64_t out_shape[kMaxDims] = {};
  int64_t src_stride[kMaxDims] = {};
};

// E: an unsigned type of the element's size (the bits move, never their meaning).
template <class E>
__global__ void permute_kernel(const E* x, E* out, int64_t count, PermuteLayout layout) {
  for (int64_t i = global_thread(); i < count; i += grid_threads()) {
    int64_t rest = i, src = 0;
    for (int d = layout.nd - 1; d >= 0; --d) {
      src += (rest % layout.out_shape[d]) * layout.src_stride[d];
      rest /= layout.out_shape[d];
    }
    out[i] = x[src];
  }
}

template <class Fn>
void with_element_size(size_t bytes, Fn&& fn) {
  switch (bytes) {
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
  }
  throw RuntimeError(cat("no element type of ", bytes, " bytes"));
}

// out row t of [tokens, h] = table row ids[t] - first, for ids in the table.
template <class E>
__global__ void gather_rows_kernel(const E* table, int64_t rows, int64_t h, const int64_t* ids, int64_t first, E* out,
                                   int64_t tokens) {
  for (int64_t i = global_thread(); i < tokens * h; i += grid_threads()) {
    const int64_t t = i / h, local = ids[t] - first;
    if (local >= 0 && local < rows) out[i] = table[local * h + i % h];
  }
}

template <class T, class S>
__global__ void scatter_add_rows_kernel(const T* grad, int64_t tokens, int64_t h, const int64_t* ids, int64_t first,
                                        S* sums, int64_t rows) {
  for (int64_t i = global_thread(); i < tokens * h; i += grid_threads()) {
    const int64_t t = i / h, local = ids[t] - first;
    if (local >= 0 && local < rows) atomicAdd(&sums[local * h + i % h], static_cast<S>(widen(grad[i])));
  }
}

// Threads a vectorized kernel wants: one per vector, and the tail's.
template <class T>
int64_t threads_for(int64_t n, int64_t vecs) {
  return std::max<int64_t>(vecs, n - vecs * Vec16<T>::kWidth);
}

template <class Kernel, class... Args>
void launch(const char* what, int64_t n, Kernel kernel, Args... args) {  // n: threads wanted
  if (n == 0) return;
  kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(args...);
  SEXTANT_CHECK_LAUNCH(what);
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  require_dtype("gelu_forward", "y", y, x.dtype());
  with_storage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t vecs = vectors_of<T>(x.numel(), {x.raw(), y.raw()});
    launch("gelu_forward", threads_for<T>(x.numel(), vecs), gelu_forward_kernel<T>, ptr<T>(x), ptr<T>(y), x.numel(),
           vecs);
  });
}

void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  require_dtype("gelu_backward", "dy", dy, x.dtype());
  require_dtype("gelu_backward", "dx", dx, x.dtype());
  with_storage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t vecs = vectors_of<T>(x.numel(), {dy.raw(), x.raw(), dx.raw()});
    launch("gelu_backward", threads_for<T>(x.numel(), vecs), gelu_backward_kernel<T>, ptr<T>(dy), ptr<T>(x), ptr<T>(dx),
           x.numel(), vecs);
  });
}

void bias_add(const Tensor& x, const Tensor& bias, Tensor& y) {
  require_dtype("bias_add", "y", y, x.dtype());
  with_storage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using F = compute_t<T>;
    const Tensor b = as_dtype(bias, dtype_of<F>());  // widening is exact: the host op's values
    const int64_t vecs = vectors_of<T>(x.numel(), {x.raw(), y.raw()});
    launch("bias_add", threads_for<T>(x.numel(), vecs), bias_add_kernel<T>, ptr<T>(x), ptr<F>(b), ptr<T>(y), x.numel(),
           x.dim(-1), vecs);
  });
}

void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamScalars& s) {
  const Tensor g = as_dtype(grad, DType::f32);  // widened as the host's HostIn<float>
  const int64_t n = param.numel(), vecs = vectors_of<float>(n, {param.raw(), g.raw(), exp_avg.raw(), exp_avg_sq.raw()});
  launch("adam_step", threads_for<float>(n, vecs), adam_kernel, ptr<float>(param), ptr<float>(g), ptr<float>(exp_avg),
         ptr<float>(exp_avg_sq), n, vecs, s);
}

void add_into(Tensor& y, const Tensor& x) {
  with_storage(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t vecs = vectors_of<T>(y.numel(), {y.raw(), x.raw()});
    launch("add_into", threads_for<T>(y.numel(), vecs), add_into_kernel<T>, ptr<T>(y), ptr<T>(x), y.numel(), vecs);
  });
}

void mul_add(const Tensor& a, const Tensor& b, const Tensor& c, Tensor& out) {
  with_storage(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch("mul_add", out.numel(), mul_add_kernel<T>, ptr<T>(a), ptr<T>(b), c.defined() ? ptr<T>(c) : nullptr,
           ptr<T>(out), out.numel());
  });
}

void permute_rows(const Tensor& x, const Shape& view, const std::vector<int>& order, Tensor& out) {
  const int nd = static_cast<int>(view.size());
  if (nd > kMaxDims) throw RuntimeError(cat("permute_rows on CUDA: at most ", kMaxDims, " dims"));
  std::vector<int64_t> stride(nd, 1);
  for (int i = nd - 2; i >= 0; --i) stride[i] = stride[i + 1] * view[i + 1];
  PermuteLayout layout;
  layout.nd = nd;
  for (int i = 0; i < nd; ++i) {
    layout.out_shape[i] = view[order[i]];
    layout.src_stride[i] = stride[order[i]];
  }
  with_element_size(dtype_size(x.dtype()), [&](auto tag) {
    using E = decltype(tag);
    launch("permute_rows", x.numel(), permute_kernel<E>, ptr<E>(x), ptr<E>(out), x.numel(), layout);
  });
}

void gather_rows(const Tensor& table, std::span<const int64_t> ids, int64_t first, Tensor& out) {
  const DeviceIds device_ids(ids);
  const int64_t tokens = static_cast<int64_t>(ids.size()), h = table.dim(1);
  with_element_size(dtype_size(table.dtype()), [&](auto tag) {
    using E = decltype(tag);
    launch("gather_rows", tokens * h, gather_rows_kernel<E>, ptr<E>(table), table.dim(0), h, device_ids.get(), first,
           ptr<E>(out), tokens);
  });
}

void scatter_add_rows(const Tensor& grad, std::span<const int64_t> ids, int64_t first, Tensor& sums) {
  const DeviceIds device_ids(ids);
  const int64_t tokens = static_cast<int64_t>(ids.size()), h = sums.dim(1);
  with_storage(grad.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto sum_tag) {
      using S = decltype(sum_tag);
      launch("scatter_add_rows", tokens * h, scatter_add_rows_kernel<T, S>, ptr<T>(grad), tokens, h, device_ids.get(),
             first, ptr<S>(sums), sums.dim(0));
    };
    if (sums.dtype() == DType::f64) run(double{});
    else run(float{});
  });
}

}  // namespace sextant::ops::cuda
