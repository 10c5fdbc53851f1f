#include "kernels/tensor_parallel/attention_proj.h"

#include <cmath>
#include <cstring>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/tensor_parallel/shard.h"

namespace sextant::tp {

namespace {
// Copies each of `rows_groups` rows of the packed [rows groups, (r + 2) d]
// between it and the three parts, whose rows are r d (q), d (k), d (v) wide.
// to_parts: packed -> parts; otherwise parts -> packed.
void copy_qkv(Tensor& packed, Tensor* parts[3], int64_t rows_groups, int64_t r, int64_t d, bool to_parts) {
  const size_t elem = dtype_size(packed.dtype());
  const size_t width[3] = {static_cast<size_t>(r * d) * elem, static_cast<size_t>(d) * elem,
                           static_cast<size_t>(d) * elem};
  const size_t offset[3] = {0, width[0], width[0] + width[1]}, packed_row = width[0] + width[1] + width[2];
  auto* p = static_cast<char*>(packed.raw());
  for (int64_t i = 0; i < rows_groups; ++i)
    for (int j = 0; j < 3; ++j) {
      char* part = static_cast<char*>(parts[j]->raw()) + i * width[j];
      char* pack = p + i * packed_row + offset[j];
      if (to_parts) std::memcpy(part, pack, width[j]);
      else std::memcpy(pack, part, width[j]);
    }
}

// On a device: [rows groups, r + 2, d] -> [r + 2, rows groups, d], where k and
// v are contiguous blocks and q's [r, rows groups, d] permutes back to
// [rows groups, r, d]. Merging runs the same steps backwards.
Qkv split_qkv_device(const Tensor& packed, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  const int64_t r = heads / kv_heads, rows_groups = packed.dim(0) * packed.dim(1) * kv_heads;
  Tensor parts = Tensor::empty({r + 2, rows_groups, head_dim}, packed.dtype(), packed.device());
  SEXTANT_CUDA_CALL(ops::cuda::permute_rows(packed, {rows_groups, r + 2, head_dim}, {1, 0, 2}, parts));
  Tensor q = Tensor::empty({packed.dim(0), packed.dim(1), heads, head_dim}, packed.dtype(), packed.device());
  SEXTANT_CUDA_CALL(ops::cuda::permute_rows(narrow(parts, 0, 0, r), {r, rows_groups, head_dim}, {1, 0, 2}, q));
  const Shape kv{packed.dim(0), packed.dim(1), kv_heads, head_dim};
  return {q, narrow(parts, 0, r, 1).reshape(kv), narrow(parts, 0, r + 1, 1).reshape(kv)};
}

Tensor merge_qkv_device(const Qkv& in) {
  const Shape& s = in.q.shape();
  const int64_t groups = in.k.dim(2), r = s[2] / groups, rows_groups = s[0] * s[1] * groups;
  Tensor q = Tensor::empty({r, rows_groups, s[3]}, in.q.dtype(), in.q.device());
  SEXTANT_CUDA_CALL(ops::cuda::permute_rows(in.q, {rows_groups, r, s[3]}, {1, 0, 2}, q));
  const Shape part{1, rows_groups, s[3]};
  const Tensor parts = concat({q, in.k.reshape(part), in.v.reshape(part)}, 0);  // [r + 2, rows groups, d]
  Tensor packed = Tensor::empty({s[0], s[1], groups * (r + 2) * s[3]}, in.q.dtype(), in.q.device());
  SEXTANT_CUDA_CALL(ops::cuda::permute_rows(parts, {r + 2, rows_groups, s[3]}, {1, 0, 2}, packed));
  return packed;
}
}  // namespace

Qkv split_qkv(const Tensor& packed, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  if (kv_heads < 1 || heads % kv_heads != 0)
    throw RuntimeError(cat("split_qkv: kv_heads ", kv_heads, " must divide heads ", heads));
  const int64_t width = (heads + 2 * kv_heads) * head_dim;
  if (!packed.defined() || packed.ndim() != 3 || packed.dim(2) != width)
    throw RuntimeError(cat("split_qkv: packed ", shape_string(packed.shape()), " must be [b, s, ", width, "]"));
  if (!packed.is_host()) return split_qkv_device(packed, heads, kv_heads, head_dim);
  const Shape q{packed.dim(0), packed.dim(1), heads, head_dim}, kv{packed.dim(0), packed.dim(1), kv_heads, head_dim};
  Qkv out{Tensor::empty(q, packed.dtype()), Tensor::empty(kv, packed.dtype()), Tensor::empty(kv, packed.dtype())};
  Tensor* parts[3] = {&out.q, &out.k, &out.v};
  Tensor src = packed;
  copy_qkv(src, parts, packed.dim(0) * packed.dim(1) * kv_heads, heads / kv_heads, head_dim, true);
  return out;
}

Tensor merge_qkv(const Qkv& in) {
  const Shape& s = in.q.shape();
  const bool shapes = s.size() == 4 && in.k.ndim() == 4 && in.k.shape() == in.v.shape() && in.k.dim(0) == s[0] &&
                      in.k.dim(1) == s[1] && in.k.dim(3) == s[3] && in.k.dim(2) > 0 && s[2] % in.k.dim(2) == 0;
  if (!shapes || in.k.device() != in.q.device() || in.v.device() != in.q.device())
    throw RuntimeError(cat("merge_qkv: q ", shape_string(s), ", k ", shape_string(in.k.shape()), " and v ",
                           shape_string(in.v.shape()),
                           " must be [b, s, heads, d] and [b, s, kv_heads, d] (kv_heads "
                           "dividing heads) on one device"));
  if (!in.q.is_host()) return merge_qkv_device(in);
  const int64_t groups = in.k.dim(2), r = s[2] / groups;
  Tensor packed = Tensor::empty({s[0], s[1], groups * (r + 2) * s[3]}, in.q.dtype());
  Qkv copy = in;
  Tensor* parts[3] = {&copy.q, &copy.k, &copy.v};
  copy_qkv(packed, parts, s[0] * s[1] * groups, r, s[3], false);
  return packed;
}

Qkv qkv_forward(const TpGroup& g, const AttentionProjWeights& w, const Tensor& x, AttentionProjSaved& saved) {
  Tensor ln = layernorm_forward(g, x, w.ln_gamma, w.ln_beta, saved.ln);  // [b, s/tp | s, h]
  Tensor packed = column_parallel_forward(g, w.qkv, ln, saved.qkv);      // [b, s, heads/tp 3 d]
  return split_qkv(packed, w.local_heads, w.local_kv_heads, w.head_dim);
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
  const int64_t kv_heads = d.kv();
  if (kv_heads % tp_size != 0 || d.heads % kv_heads != 0)
    throw RuntimeError(cat("init_attention_proj_weights: tp ", tp_size, " must divide kv_heads ", kv_heads,
                           ", which must divide heads ", d.heads));
  auto spec = [&](const char* name, double scale) { return RandomSpec{seed, tensor_id(prefix + name), scale}; };
  const int64_t width = d.heads * d.head_dim, qkv = (d.heads + 2 * kv_heads) * d.head_dim;
  AttentionProjWeights w;
  w.ln_gamma = random_shard({d.hidden}, 0, 1, 0, dtype, spec(".ln_gamma", 1.0), device);
  w.ln_beta = random_shard({d.hidden}, 0, 1, 0, dtype, spec(".ln_beta", 1.0), device);
  w.qkv.w = random_shard({d.hidden, qkv}, 1, tp_size, tp_rank, dtype,
                         spec(".wqkv", 1 / std::sqrt(static_cast<double>(d.hidden))), device);
  w.qkv.b = random_shard({qkv}, 0, tp_size, tp_rank, dtype, spec(".bqkv", 0.1), device);
  w.out.w = random_shard({width, d.hidden}, 0, tp_size, tp_rank, dtype,
                         spec(".wo", 1 / std::sqrt(static_cast<double>(width))), device);
  w.out.b = random_shard({d.hidden}, 0, 1, 0, dtype, spec(".bo", 0.1), device);
  w.local_heads = d.heads / tp_size;
  w.local_kv_heads = kv_heads / tp_size;
  w.head_dim = d.head_dim;
  return w;
}

}  // namespace sextant::tp
