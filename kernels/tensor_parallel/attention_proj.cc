#include "kernels/tensor_parallel/attention_proj.h"

#include <cmath>
#include <cstring>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/tensor_parallel/shard.h"

namespace sextant::tp {

namespace {
// Copies rows of `width` elements between [rows, heads, 3, d] and three [rows, heads, d].
// to_parts: packed -> parts; otherwise parts -> packed.
void copy_qkv(Tensor& packed, Tensor* parts[3], int64_t rows_heads, int64_t d, bool to_parts) {
  const size_t row = static_cast<size_t>(d) * dtype_size(packed.dtype());
  auto* p = static_cast<char*>(packed.raw());
  for (int64_t i = 0; i < rows_heads; ++i)
    for (int j = 0; j < 3; ++j) {
      char* part = static_cast<char*>(parts[j]->raw()) + i * row;
      char* pack = p + (i * 3 + j) * row;
      if (to_parts) std::memcpy(part, pack, row);
      else std::memcpy(pack, part, row);
    }
}

// On a device: one permute [rows heads, 3, d] <-> [3, rows heads, d]; the
// three parts are then contiguous blocks.
Qkv split_qkv_device(const Tensor& packed, int64_t heads, int64_t head_dim) {
  const int64_t rows_heads = packed.dim(0) * packed.dim(1) * heads;
  Tensor parts = Tensor::empty({3, rows_heads, head_dim}, packed.dtype(), packed.device());
  SEXTANT_CUDA_CALL(ops::cuda::permute_rows(packed, {rows_heads, 3, head_dim}, {1, 0, 2}, parts));
  const Shape shape{packed.dim(0), packed.dim(1), heads, head_dim};
  return {narrow(parts, 0, 0, 1).reshape(shape), narrow(parts, 0, 1, 1).reshape(shape),
          narrow(parts, 0, 2, 1).reshape(shape)};
}

Tensor merge_qkv_device(const Qkv& in) {
  const Shape& s = in.q.shape();
  const int64_t rows_heads = s[0] * s[1] * s[2];
  const Shape part{1, rows_heads, s[3]};
  const Tensor parts = concat({in.q.reshape(part), in.k.reshape(part), in.v.reshape(part)}, 0);  // [3, rows heads, d]
  Tensor packed = Tensor::empty({s[0], s[1], s[2] * 3 * s[3]}, in.q.dtype(), in.q.device());
  SEXTANT_CUDA_CALL(ops::cuda::permute_rows(parts, {3, rows_heads, s[3]}, {1, 0, 2}, packed));
  return packed;
}
}  // namespace

Qkv split_qkv(const Tensor& packed, int64_t heads, int64_t head_dim) {
  if (!packed.defined() || packed.ndim() != 3 || packed.dim(2) != heads * 3 * head_dim)
    throw RuntimeError(
        cat("split_qkv: packed ", shape_string(packed.shape()), " must be [b, s, ", heads * 3 * head_dim, "]"));
  if (!packed.is_host()) return split_qkv_device(packed, heads, head_dim);
  const Shape shape{packed.dim(0), packed.dim(1), heads, head_dim};
  Qkv out{Tensor::empty(shape, packed.dtype()), Tensor::empty(shape, packed.dtype()),
          Tensor::empty(shape, packed.dtype())};
  Tensor* parts[3] = {&out.q, &out.k, &out.v};
  Tensor src = packed;
  copy_qkv(src, parts, packed.dim(0) * packed.dim(1) * heads, head_dim, true);
  return out;
}

Tensor merge_qkv(const Qkv& in) {
  const Shape& s = in.q.shape();
  if (s.size() != 4 || in.k.shape() != s || in.v.shape() != s || in.k.device() != in.q.device() ||
      in.v.device() != in.q.device())
    throw RuntimeError("merge_qkv: q, k, v must be tensors of one shape [b, s, heads, d] on one device");
  if (!in.q.is_host()) return merge_qkv_device(in);
  Tensor packed = Tensor::empty({s[0], s[1], s[2] * 3 * s[3]}, in.q.dtype());
  Qkv copy = in;
  Tensor* parts[3] = {&copy.q, &copy.k, &copy.v};
  copy_qkv(packed, parts, s[0] * s[1] * s[2], s[3], false);
  return packed;
}

Qkv qkv_forward(const TpGroup& g, const AttentionProjWeights& w, const Tensor& x, AttentionProjSaved& saved) {
  Tensor ln = layernorm_forward(g, x, w.ln_gamma, w.ln_beta, saved.ln);  // [b, s/tp | s, h]
  Tensor packed = column_parallel_forward(g, w.qkv, ln, saved.qkv);      // [b, s, heads/tp 3 d]
  return split_qkv(packed, w.local_heads, w.head_dim);
}

Tensor qkv_backward(const TpGroup& g, const AttentionProjWeights& w, const AttentionProjSaved& saved, const Qkv& dqkv,
                    AttentionProjGrads& grads) {
  Tensor dln = column_parallel_backward(g, w.qkv, saved.qkv, merge_qkv(dqkv), grads.qkv);  // [b, s/tp | s, h]
  return layernorm_backward(g, saved.ln, w.ln_gamma, dln, grads.ln_gamma, grads.ln_beta);
}

Tensor out_proj_forward(const TpGroup& g, const AttentionProjWeights& w, const Tensor& o, AttentionProjSaved& saved) {
  // A rank-4 tensor is a [rows, d] matrix to gemm: flatten the heads first.
  Tensor flat = o.reshape({o.dim(0), o.dim(1), o.dim(2) * o.dim(3)});  // [b, s, heads/tp d]
  return row_parallel_forward(g, w.out, flat, saved.out);
}

Tensor out_proj_backward(const TpGroup& g, const AttentionProjWeights& w, const AttentionProjSaved& saved,
                         const Tensor& dy, AttentionProjGrads& grads) {
  Tensor dflat = row_parallel_backward(g, w.out, saved.out, dy, grads.out);  // [b, s, heads/tp d]
  return dflat.reshape({dflat.dim(0), dflat.dim(1), w.local_heads, w.head_dim});
}

AttentionProjWeights init_attention_proj_weights(const AttentionDims& d, int tp_rank, int tp_size, DType dtype,
                                                 uint64_t seed, const std::string& prefix, Device device) {
  if (d.heads % tp_size != 0)
    throw RuntimeError(cat("init_attention_proj_weights: tp ", tp_size, " does not divide heads ", d.heads));
  auto spec = [&](const char* name, double scale) { return RandomSpec{seed, tensor_id(prefix + name), scale}; };
  const int64_t width = d.heads * d.head_dim;
  AttentionProjWeights w;
  w.ln_gamma = random_shard({d.hidden}, 0, 1, 0, dtype, spec(".ln_gamma", 1.0), device);
  w.ln_beta = random_shard({d.hidden}, 0, 1, 0, dtype, spec(".ln_beta", 1.0), device);
  w.qkv.w = random_shard({d.hidden, 3 * width}, 1, tp_size, tp_rank, dtype,
                         spec(".wqkv", 1 / std::sqrt(static_cast<double>(d.hidden))), device);
  w.qkv.b = random_shard({3 * width}, 0, tp_size, tp_rank, dtype, spec(".bqkv", 0.1), device);
  w.out.w = random_shard({width, d.hidden}, 0, tp_size, tp_rank, dtype,
                         spec(".wo", 1 / std::sqrt(static_cast<double>(width))), device);
  w.out.b = random_shard({d.hidden}, 0, 1, 0, dtype, spec(".bo", 0.1), device);
  w.local_heads = d.heads / tp_size;
  w.head_dim = d.head_dim;
  return w;
}

}  // namespace sextant::tp
