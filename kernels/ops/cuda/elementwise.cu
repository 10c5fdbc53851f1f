// Element-wise ops on the GPU: GELU, bias add, Adam, and the helpers the
// parallel kernels' device paths use (add_into, mul_add, permute_rows, the
// embedding gather / scatter-add). One thread per element, grid-stride loops.
//
// Same formulas as the host ops, term for term (gelu.cc, adam.cc); GELU uses
// expf where the host uses its own vexp, within a few ulp of each other, and
// either side may fuse a multiply-add (the host's AVX2 / AVX-512 clones do),
// so results agree to rounding, not bit for bit. mul_add spells its two
// roundings out (__fmul_rn, __fadd_rn), as the suites' portable host loop
// computes them.
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

template <class T>
__global__ void gelu_forward_kernel(const T* x, T* y, int64_t n) {
  using F = compute_t<T>;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const F xi = widen(x[i]);
    y[i] = narrow_to<T>(xi / (F(1) + exp_minus_2u<F>(xi)));
  }
}

// d/dx [x s] = s + 2 x s (1 - s) du/dx with s = sigmoid(2u), 1 - s = e s (gelu.cc).
template <class T>
__global__ void gelu_backward_kernel(const T* dy, const T* x, T* dx, int64_t n) {
  using F = compute_t<T>;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const F xi = widen(x[i]);
    const F e = exp_minus_2u<F>(xi);
    const F s = F(1) / (F(1) + e);
    const F du = F(0.7978845608028654) * (F(1) + F(3) * F(0.044715) * xi * xi);
    dx[i] = narrow_to<T>(widen(dy[i]) * (s + F(2) * xi * s * (e * s) * du));
  }
}

// bias: [n] already in the compute type.
template <class T>
__global__ void bias_add_kernel(const T* x, const compute_t<T>* bias, T* y, int64_t count, int64_t n) {
  for (int64_t i = global_thread(); i < count; i += grid_threads()) y[i] = narrow_to<T>(widen(x[i]) + bias[i % n]);
}

template <class T>
__global__ void add_into_kernel(T* y, const T* x, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) y[i] = narrow_to<T>(widen(y[i]) + widen(x[i]));
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

// adam.cc's adam_update_f32.
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, AdamScalars s) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float gi = g[i];
    const float mi = s.beta1 * m[i] + s.one_minus_beta1 * gi;
    const float vi = s.beta2 * v[i] + s.one_minus_beta2 * gi * gi;
    const float denom = sqrtf(vi) * s.inv_sqrt_bc2 + s.eps;
    p[i] = p[i] * s.decay - s.step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
  }
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

template <class Kernel, class... Args>
void launch(const char* what, int64_t n, Kernel kernel, Args... args) {
  if (n == 0) return;
  kernel<<<grid_for(n, kThreads), kThreads, 0, compute_stream()>>>(args...);
  SEXTANT_CHECK_LAUNCH(what);
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  require_dtype("gelu_forward", "y", y, x.dtype());
  with_storage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch("gelu_forward", x.numel(), gelu_forward_kernel<T>, ptr<T>(x), ptr<T>(y), x.numel());
  });
}

void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  require_dtype("gelu_backward", "dy", dy, x.dtype());
  require_dtype("gelu_backward", "dx", dx, x.dtype());
  with_storage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch("gelu_backward", x.numel(), gelu_backward_kernel<T>, ptr<T>(dy), ptr<T>(x), ptr<T>(dx), x.numel());
  });
}

void bias_add(const Tensor& x, const Tensor& bias, Tensor& y) {
  require_dtype("bias_add", "y", y, x.dtype());
  with_storage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using F = compute_t<T>;
    const Tensor b = as_dtype(bias, dtype_of<F>());  // widening is exact: the host op's values
    launch("bias_add", x.numel(), bias_add_kernel<T>, ptr<T>(x), ptr<F>(b), ptr<T>(y), x.numel(), x.dim(-1));
  });
}

void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamScalars& s) {
  const Tensor g = as_dtype(grad, DType::f32);  // widened as the host's HostIn<float>
  launch("adam_step", param.numel(), adam_kernel, ptr<float>(param), ptr<float>(g), ptr<float>(exp_avg),
         ptr<float>(exp_avg_sq), param.numel(), s);
}

void add_into(Tensor& y, const Tensor& x) {
  with_storage(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch("add_into", y.numel(), add_into_kernel<T>, ptr<T>(y), ptr<T>(x), y.numel());
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
