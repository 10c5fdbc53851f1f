#include "suites/tp_sp/token_mix.h"

#include "kernels/ops/device_dispatch.h"
#include "kernels/tensor_parallel/widen.h"

namespace sextant::tp_sp {

Tensor token_mix_forward(const tp::Qkv& in) {
  Tensor out = Tensor::empty(in.q.shape(), in.q.dtype(), in.q.device());
  if (!out.is_host()) {  // the same products and sums, each rounded as this loop rounds them
    SEXTANT_CUDA_CALL(ops::cuda::mul_add(in.q, in.k, in.v, out));
    return out;
  }
  tp::with_compute_type(out.dtype(), [&](auto tag) {
    using F = decltype(tag);
    const Tensor q = tp::widened<F>(in.q), k = tp::widened<F>(in.k), v = tp::widened<F>(in.v);
    Tensor o = Tensor::empty(out.shape(), dtype_of<F>());
    const F *Q = q.data<F>(), *K = k.data<F>(), *V = v.data<F>();
    F* O = o.data<F>();
    for (int64_t i = 0; i < o.numel(); ++i) O[i] = Q[i] * K[i] + V[i];
    tp::store_rounded(out, o);
  });
  return out;
}

tp::Qkv token_mix_backward(const tp::Qkv& in, const Tensor& dout) {
  tp::Qkv d{Tensor::empty(in.q.shape(), in.q.dtype(), dout.device()),
            Tensor::empty(in.q.shape(), in.q.dtype(), dout.device()), dout.clone()};
  if (!dout.is_host()) {
    SEXTANT_CUDA_CALL(ops::cuda::mul_add(dout, in.k, Tensor(), d.q));
    SEXTANT_CUDA_CALL(ops::cuda::mul_add(dout, in.q, Tensor(), d.k));
    return d;
  }
  tp::with_compute_type(dout.dtype(), [&](auto tag) {
    using F = decltype(tag);
    const Tensor q = tp::widened<F>(in.q), k = tp::widened<F>(in.k), g = tp::widened<F>(dout);
    Tensor dq = Tensor::empty(q.shape(), dtype_of<F>()), dk = Tensor::empty(q.shape(), dtype_of<F>());
    const F *Q = q.data<F>(), *K = k.data<F>(), *G = g.data<F>();
    F *DQ = dq.data<F>(), *DK = dk.data<F>();
    for (int64_t i = 0; i < g.numel(); ++i) {
      DQ[i] = G[i] * K[i];
      DK[i] = G[i] * Q[i];
    }
    tp::store_rounded(d.q, dq);
    tp::store_rounded(d.k, dk);
  });
  return d;
}

Tensor token_mix_forward_f64(const Tensor& q, const Tensor& k, const Tensor& v) {
  Tensor o = Tensor::empty(q.shape(), DType::f64);
  for (int64_t i = 0; i < o.numel(); ++i) o.set(i, q.at(i) * k.at(i) + v.at(i));
  return o;
}

void token_mix_backward_f64(const Tensor& q, const Tensor& k, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  dq = Tensor::empty(q.shape(), DType::f64);
  dk = Tensor::empty(q.shape(), DType::f64);
  dv = dout.to(DType::f64);
  for (int64_t i = 0; i < dout.numel(); ++i) {
    dq.set(i, dout.at(i) * k.at(i));
    dk.set(i, dout.at(i) * q.at(i));
  }
}

}  // namespace sextant::tp_sp
