#include "kernels/tensor_parallel/attention_proj.h"

#include <cmath>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/tensor_parallel/shard.h"

namespace sextant::tp {

// The packed projection is, per (token, KV group), one row of r d query
// columns, d key columns and dv value columns (r = heads / kv): splitting
// is three column blocks of a [tokens groups, r d + d + dv] matrix, merging
// their concatenation. narrow and concat copy pitched rows on the host and
// the device alike (cudaMemcpy2D), so one path serves both.
Qkv split_qkv(const Tensor& packed, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t v_head_dim) {
  if (kv_heads < 1 || heads % kv_heads != 0)
    throw RuntimeError(cat("split_qkv: kv_heads ", kv_heads, " must divide heads ", heads));
  const int64_t r = heads / kv_heads, d = head_dim, dv = v_head_dim, group = (r + 1) * d + dv;
  if (!packed.defined() || packed.ndim() != 3 || packed.dim(2) != kv_heads * group)
    throw RuntimeError(
        cat("split_qkv: packed ", shape_string(packed.shape()), " must be [b, s, ", kv_heads * group, "]"));
  const int64_t b = packed.dim(0), s = packed.dim(1);
  const Tensor rows = packed.reshape({b * s * kv_heads, group});  // [tokens groups, r d + d + dv]
  return {narrow(rows, 1, 0, r * d).reshape({b, s, heads, d}), narrow(rows, 1, r * d, d).reshape({b, s, kv_heads, d}),
          narrow(rows, 1, (r + 1) * d, dv).reshape({b, s, kv_heads, dv})};
}

Tensor merge_qkv(const Qkv& in) {
  const Shape& s = in.q.shape();
  const bool shapes = s.size() == 4 && in.k.ndim() == 4 && in.v.ndim() == 4 && in.k.dim(0) == s[0] &&
                      in.k.dim(1) == s[1] && in.k.dim(3) == s[3] && in.k.dim(2) > 0 && s[2] % in.k.dim(2) == 0 &&
                      in.v.dim(0) == s[0] && in.v.dim(1) == s[1] && in.v.dim(2) == in.k.dim(2);
  if (!shapes || in.k.device() != in.q.device() || in.v.device() != in.q.device())
    throw RuntimeError(cat("merge_qkv: q ", shape_string(s), ", k ", shape_string(in.k.shape()), " and v ",
                           shape_string(in.v.shape()),
                           " must be [b, s, heads, d], [b, s, kv_heads, d] and [b, s, kv_heads, dv] (kv_heads "
                           "dividing heads) on one device"));
  const int64_t groups = in.k.dim(2), r = s[2] / groups, d = s[3], dv = in.v.dim(3), rows = s[0] * s[1] * groups;
  const Tensor packed = concat({in.q.reshape({rows, r * d}), in.k.reshape({rows, d}), in.v.reshape({rows, dv})}, 1);
  return packed.reshape({s[0], s[1], groups * ((r + 1) * d + dv)});
}

Qkv qkv_forward(const TpGroup& g, const AttentionProjWeights& w, const Tensor& x, AttentionProjSaved& saved) {
  Tensor ln = layernorm_forward(g, x, w.ln_gamma, w.ln_beta, saved.ln);  // [b, s/tp | s, h]
  Tensor packed = column_parallel_forward(g, w.qkv, ln, saved.qkv);      // [b, s, ((heads + kv) d + kv dv)/tp]
  return split_qkv(packed, w.local_heads, w.local_kv_heads, w.head_dim, w.v_head_dim);
}

Tensor qkv_backward(const TpGroup& g, const AttentionProjWeights& w, const AttentionProjSaved& saved, const Qkv& dqkv,
                    AttentionProjGrads& grads) {
  Tensor dln = column_parallel_backward(g, w.qkv, saved.qkv, merge_qkv(dqkv), grads.qkv);  // [b, s/tp | s, h]
  return layernorm_backward(g, saved.ln, w.ln_gamma, dln, grads.ln_gamma, grads.ln_beta);
}

Tensor out_proj_forward(const TpGroup& g, const AttentionProjWeights& w, const Tensor& o, AttentionProjSaved& saved) {
  // A rank-4 tensor is a [rows, d] matrix to gemm: flatten the heads first.
  Tensor flat = o.reshape({o.dim(0), o.dim(1), o.dim(2) * o.dim(3)});  // [b, s, heads/tp dv]
  return row_parallel_forward(g, w.out, flat, saved.out);
}

Tensor out_proj_backward(const TpGroup& g, const AttentionProjWeights& w, const AttentionProjSaved& saved,
                         const Tensor& dy, AttentionProjGrads& grads) {
  Tensor dflat = row_parallel_backward(g, w.out, saved.out, dy, grads.out);  // [b, s, heads/tp dv]
  return dflat.reshape({dflat.dim(0), dflat.dim(1), w.local_heads, w.v_head_dim});
}

AttentionProjWeights init_attention_proj_weights(const AttentionDims& d, int tp_rank, int tp_size, DType dtype,
                                                 uint64_t seed, const std::string& prefix, Device device) {
  const int64_t kv_heads = d.kv();
  if (kv_heads % tp_size != 0 || d.heads % kv_heads != 0)
    throw RuntimeError(cat("init_attention_proj_weights: tp ", tp_size, " must divide kv_heads ", kv_heads,
                           ", which must divide heads ", d.heads));
  auto spec = [&](const char* name, double scale) { return RandomSpec{seed, tensor_id(prefix + name), scale}; };
  const int64_t width = d.out_width(), qkv = d.qkv_width();
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
  w.v_head_dim = d.dv();
  return w;
}

void use_fp8_linears(AttentionProjWeights& w, const ops::Fp8Recipe& recipe) {
  w.qkv.fp8 = std::make_shared<Fp8LinearState>(recipe);
  w.out.fp8 = std::make_shared<Fp8LinearState>(recipe);
}

}  // namespace sextant::tp
