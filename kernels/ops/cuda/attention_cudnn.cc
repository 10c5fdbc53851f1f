// The attention block on cuDNN's fused SDPA: the mask becomes pieces that
// need no mask or the plain causal diagonal (attention_pieces.h), each piece
// one fused call whose O (in the storage dtype, as cuDNN writes it) and LSE
// merge into the f32 accumulators, and whose gradients add into dq, dk, dv.
#include "kernels/ops/attention_pieces.h"
#include "kernels/ops/cuda/cudnn_sdpa.h"
#include "kernels/ops/cuda_ops.h"

namespace sextant::ops::cuda {

namespace {

cudnn::SdpaShape shape_of(const Tensor& q, const Tensor& k, const AttentionPiece& p) {
  return {.dtype = q.dtype(),
          .b = q.dim(0),
          .hq = q.dim(2),
          .hk = k.dim(2),
          .d = q.dim(3),
          .q_rows = q.dim(1),
          .k_rows = k.dim(1),
          .sq = p.sq,
          .sk = p.sk,
          .causal = p.causal};
}

// Address of row `row` of the first batch of a BSHD tensor: a piece keeps
// the block's strides.
const void* row_ptr(const Tensor& t, int64_t row) {
  return static_cast<const char*>(t.raw()) + row * t.dim(2) * t.dim(3) * static_cast<int64_t>(dtype_size(t.dtype()));
}

}  // namespace

int64_t attention_forward_cudnn(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                                Tensor& out, Tensor& lse) {
  PieceKernels kernels;
  kernels.forward = [&](const AttentionPiece& p, Tensor& o, Tensor& stats) {
    cudnn::run_forward(shape_of(q, k, p),
                       {row_ptr(q, p.q0), row_ptr(k, p.k0), row_ptr(v, p.k0), o.raw(), stats.data<float>()});
  };
  return forward_by_pieces(q, k, mask, kernels, out, lse);
}

int64_t attention_backward_accumulate_cudnn(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                            const Tensor& dout, const Tensor& lse, const AttentionMask& mask,
                                            Tensor& dq, Tensor& dk, Tensor& dv) {
  const Tensor o = out.dtype() == q.dtype() ? out : out.to(q.dtype());  // cuDNN reads O in the storage dtype
  PieceKernels kernels;
  kernels.backward = [&](const AttentionPiece& p, const Tensor& lse_p, Tensor& dq_p, Tensor& dk_p, Tensor& dv_p) {
    cudnn::run_backward(shape_of(q, k, p),
                        {row_ptr(q, p.q0), row_ptr(k, p.k0), row_ptr(v, p.k0), row_ptr(o, p.q0), row_ptr(dout, p.q0),
                         lse_p.data<float>(), dq_p.raw(), dk_p.raw(), dv_p.raw()});
  };
  return backward_by_pieces(q, k, lse, mask, kernels, dq, dk, dv);
}

}  // namespace sextant::ops::cuda
