#include "kernels/moe/experts.h"

#include "harness/error.h"
#include "harness/strings.h"

#include "kernels/ops/gelu.h"
#include "kernels/ops/gemm.h"

namespace sextant::moe {

namespace {
Tensor as_f32(const Tensor& t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); }
}  // namespace

namespace {
// `given` when it is defined (checked against the shape), else a new tensor.
Tensor output_tensor(Tensor given, const Shape& shape, DType dtype, Device device) {
  if (!given.defined()) return Tensor::empty(shape, dtype, device);
  if (given.shape() != shape || given.dtype() != dtype || given.device() != device)
    throw RuntimeError(
        cat("moe expert: output ", shape_string(given.shape()), " where ", shape_string(shape), " is needed"));
  return given;
}
}  // namespace

Tensor expert_forward(const Tensor& in, const Tensor& w1, const Tensor& w2, ExpertSaved& saved, Tensor given_out) {
  const int64_t n = in.dim(0), h = in.dim(1), f = w1.dim(1);
  saved.in = in;
  const Device device = in.device();
  saved.a = Tensor::empty({n, f}, in.dtype(), device);
  saved.g = Tensor::empty({n, f}, in.dtype(), device);
  Tensor out = output_tensor(given_out, {n, h}, in.dtype(), device);
  if (n == 0) return out;
  ops::gemm(in, false, w1, false, saved.a);   // a: [n, f] = in [n, h] W1 [h, f]
  ops::gelu_forward(saved.a, saved.g);        // g: [n, f]
  ops::gemm(saved.g, false, w2, false, out);  // out: [n, h] = g [n, f] W2 [f, h]
  return out;
}

ExpertGrads expert_backward(const Tensor& dout, const ExpertSaved& saved, const Tensor& w1, const Tensor& w2,
                            Tensor din) {
  const int64_t n = dout.dim(0), h = dout.dim(1), f = w1.dim(1);
  const Device device = dout.device();
  ExpertGrads g{output_tensor(din, {n, h}, dout.dtype(), device), Tensor::zeros({h, f}, DType::f32, device),
                Tensor::zeros({f, h}, DType::f32, device)};
  if (n == 0) return g;
  Tensor dg = Tensor::empty({n, f}, dout.dtype(), device);
  ops::gemm(dout, false, w2, true, dg);  // dg: [n, f] = dout [n, h] W2^T
  Tensor da = Tensor::empty({n, f}, dout.dtype(), device);
  ops::gelu_backward(dg, saved.a, da);    // da: [n, f]
  ops::gemm(da, false, w1, true, g.din);  // din: [n, h] = da [n, f] W1^T
  const Tensor dout32 = as_f32(dout), da32 = as_f32(da);
  ops::gemm(as_f32(saved.g), true, dout32, false, g.dw2);  // dW2: [f, h] = g^T dout
  ops::gemm(as_f32(saved.in), true, da32, false, g.dw1);   // dW1: [h, f] = in^T da
  return g;
}

}  // namespace sextant::moe
