// The attention block on cuDNN's fused SDPA: the mask becomes pieces that
// need no mask or the plain causal diagonal (attention_pieces.h), each piece
// one fused call on contiguous copies of its rows (none when the piece is the
// whole block), whose O (in the storage dtype, as cuDNN writes it) and LSE
// merge into the f32 accumulators and whose gradients add into dq, dk, dv.
// A piece cuDNN does not take (cudnn::takes: one row against one key in the
// backward, a cuDNN release that refuses the shape) runs our kernels.
#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/attention_pieces.h"
#include "kernels/ops/cuda/cudnn_sdpa.h"
#include "kernels/ops/cuda_ops.h"

namespace sextant::ops::cuda {

namespace {

cudnn::SdpaShape shape_of(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionPiece& p) {
  return {.dtype = q.dtype(),
          .b = q.dim(0),
          .hq = q.dim(2),
          .hk = k.dim(2),
          .d = q.dim(3),
          .dv = v.dim(3),
          .sq = p.sq,
          .sk = p.sk,
          .causal = p.causal,
          .scale = attention_scale(q.dim(3), v.dim(3))};
}

}  // namespace

int64_t attention_forward_cudnn(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                                Tensor& out, Tensor& lse) {
  PieceKernels kernels;
  kernels.forward = [&](const AttentionPiece& p) {
    const Tensor qp = piece_rows(q, p.q0, p.sq), kp = piece_rows(k, p.k0, p.sk), vp = piece_rows(v, p.k0, p.sk);
    const cudnn::SdpaShape shape = shape_of(q, k, v, p);
    const bool fused = cudnn::takes(shape, false);  // else our kernels, whose out is f32
    PieceOut r{Tensor::empty({q.dim(0), p.sq, q.dim(2), v.dim(3)}, fused ? q.dtype() : DType::f32, q.device()),
               Tensor::empty({q.dim(0), q.dim(2), p.sq}, DType::f32, q.device())};
    if (fused) cudnn::run_forward(shape, {qp.raw(), kp.raw(), vp.raw(), r.o.raw(), r.stats.data<float>()});
    else attention_forward(qp, kp, vp, p.mask(), r.o, r.stats);
    return r;
  };
  return forward_by_pieces(q, k, v, mask, kernels, out, lse);
}

int64_t attention_backward_accumulate_cudnn(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                            const Tensor& dout, const Tensor& lse, const Tensor& delta,
                                            const AttentionMask& mask, Tensor& dq, Tensor& dk, Tensor& dv) {
  if (dout.dtype() != q.dtype())
    throw RuntimeError(cat("attention_block_backward: dout is ", dtype_name(dout.dtype()), " but q is ",
                           dtype_name(q.dtype()), " (on CUDA the activations of one call share a dtype)"));
  const Tensor o = out.dtype() == q.dtype() ? out : out.to(q.dtype());  // cuDNN reads O in the storage dtype
  PieceKernels kernels;
  kernels.backward = [&](const AttentionPiece& p, const Tensor& lse_p) {
    const Tensor qp = piece_rows(q, p.q0, p.sq), kp = piece_rows(k, p.k0, p.sk), vp = piece_rows(v, p.k0, p.sk);
    const Tensor dop = piece_rows(dout, p.q0, p.sq);
    const cudnn::SdpaShape shape = shape_of(q, k, v, p);
    if (!cudnn::takes(shape, true)) {  // our kernels, from delta as they read it
      PieceGrads g{Tensor::zeros(qp.shape(), DType::f32, q.device()), Tensor::zeros(kp.shape(), DType::f32, q.device()),
                   Tensor::zeros(vp.shape(), DType::f32, q.device())};
      attention_backward_accumulate(qp, kp, vp, dop, lse_p, piece_rows(delta, p.q0, p.sq, 2), p.mask(), g.dq, g.dk,
                                    g.dv);
      return g;
    }
    PieceGrads g{Tensor::empty(qp.shape(), q.dtype(), q.device()), Tensor::empty(kp.shape(), q.dtype(), q.device()),
                 Tensor::empty(vp.shape(), q.dtype(), q.device())};
    cudnn::run_backward(shape, {qp.raw(), kp.raw(), vp.raw(), piece_rows(o, p.q0, p.sq).raw(), dop.raw(),
                                lse_p.data<float>(), g.dq.raw(), g.dk.raw(), g.dv.raw()});
    return g;
  };
  return backward_by_pieces(q, k, lse, mask, kernels, dq, dk, dv);
}

}  // namespace sextant::ops::cuda
