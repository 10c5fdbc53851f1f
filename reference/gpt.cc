#include "reference/gpt.h"

#include <algorithm>
#include <cmath>

#include "harness/error.h"
#include "harness/strings.h"
#include "reference/attention.h"
#include "reference/cross_entropy.h"
#include "reference/embedding.h"
#include "reference/f64_tensor.h"
#include "reference/layernorm.h"
#include "reference/linear.h"
#include "reference/mlp.h"
#include "reference/packed_attention.h"

namespace sextant::ref {

std::vector<Tensor*> GptLayer::tensors() {
  std::vector<Tensor*> out{&ln1_gamma, &ln1_beta, &wqkv, &bqkv, &wo, &bo, &ln2_gamma, &ln2_beta};
  if (is_moe) out.insert(out.end(), {&moe.router, &moe.w1, &moe.w2});
  else out.insert(out.end(), {&w1, &b1, &w2, &b2});
  return out;
}

std::vector<Tensor*> GptParams::tensors() {
  std::vector<Tensor*> out{&embedding};
  for (GptLayer& l : layers)
    for (Tensor* t : l.tensors()) out.push_back(t);
  out.insert(out.end(), {&lnf_gamma, &lnf_beta, &head});
  return out;
}

GptParams GptParams::zeros_like() const {
  GptParams z = *this;  // shares storage until replaced below
  for (Tensor* t : z.tensors()) *t = Tensor::zeros(t->shape(), DType::f64);
  return z;
}

namespace {

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = as_f64(a).clone();
  const Tensor bb = as_f64(b);
  for (int64_t i = 0; i < out.numel(); ++i) out.data<double>()[i] += bb.data<double>()[i];
  return out;
}

// [B, s, (H + K) d + K dv] with columns (KV group g, {its H/K query heads
// (d each), k (d), v (dv)}) -> q [B, s, H, d], k [B, s, K, d], v [B, s, K,
// dv], and back. Query head h = g H/K + i.
struct Qkv {
  Tensor q, k, v;
};
struct PackedLayout {
  int64_t heads, kv_heads, d, dv;
  int64_t per_group() const { return heads / kv_heads; }
  int64_t group_width() const { return (per_group() + 1) * d + dv; }
  int64_t width() const { return kv_heads * group_width(); }
  // Column of element e of query head i of group g (i < H/K), of k (i =
  // H/K) or of v (i = H/K + 1).
  int64_t column(int64_t g, int64_t i, int64_t e) const { return g * group_width() + i * d + e; }
};
PackedLayout layout_of(const GptDims& dims) { return {dims.heads, dims.kv(), dims.head_dim, dims.dv()}; }

Qkv split_heads(const Tensor& packed, const PackedLayout& p) {
  const int64_t r = p.per_group(), width = p.width(), rows = packed.numel() / width;
  Shape q_shape = packed.shape(), k_shape = packed.shape();
  q_shape.back() = p.heads, k_shape.back() = p.kv_heads;
  Shape v_shape = k_shape;
  q_shape.push_back(p.d), k_shape.push_back(p.d), v_shape.push_back(p.dv);
  Qkv out{Tensor::empty(q_shape, DType::f64), Tensor::empty(k_shape, DType::f64), Tensor::empty(v_shape, DType::f64)};
  const double* src = packed.data<double>();
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t g = 0; g < p.kv_heads; ++g) {
      for (int64_t e = 0; e < p.d; ++e) {
        for (int64_t i = 0; i < r; ++i)
          out.q.data<double>()[(t * p.heads + g * r + i) * p.d + e] = src[t * width + p.column(g, i, e)];
        out.k.data<double>()[(t * p.kv_heads + g) * p.d + e] = src[t * width + p.column(g, r, e)];
      }
      for (int64_t e = 0; e < p.dv; ++e)
        out.v.data<double>()[(t * p.kv_heads + g) * p.dv + e] = src[t * width + p.column(g, r + 1, e)];
    }
  return out;
}
Tensor merge_heads(const Qkv& parts, const PackedLayout& p, const Shape& packed_shape) {
  Tensor out = Tensor::empty(packed_shape, DType::f64);
  const int64_t r = p.per_group(), width = p.width(), rows = out.numel() / width;
  double* dst = out.data<double>();
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t g = 0; g < p.kv_heads; ++g) {
      for (int64_t e = 0; e < p.d; ++e) {
        for (int64_t i = 0; i < r; ++i)
          dst[t * width + p.column(g, i, e)] = parts.q.data<double>()[(t * p.heads + g * r + i) * p.d + e];
        dst[t * width + p.column(g, r, e)] = parts.k.data<double>()[(t * p.kv_heads + g) * p.d + e];
      }
      for (int64_t e = 0; e < p.dv; ++e)
        dst[t * width + p.column(g, r + 1, e)] = parts.v.data<double>()[(t * p.kv_heads + g) * p.dv + e];
    }
  return out;
}

// The token rows of a padded packed row, in order: sequence i's first
// seq_lens[i] of its seq_rows[i] rows.
std::vector<int64_t> token_rows(const GptDims& d) {
  std::vector<int64_t> rows;
  int64_t start = 0;
  for (size_t i = 0; i < d.seq_rows.size(); ++i) {
    for (int64_t t = 0; t < d.seq_lens.at(i); ++t) rows.push_back(start + t);
    start += d.seq_rows[i];
  }
  return rows;
}
// x: [B, s, ...] -> [B, rows.size(), ...], and back with zeros in the other rows.
Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& rows) {
  Shape shape = x.shape();
  const int64_t s = shape[1], width = x.numel() / (shape[0] * s), n = static_cast<int64_t>(rows.size());
  shape[1] = n;
  Tensor out = Tensor::empty(shape, DType::f64);
  for (int64_t b = 0; b < shape[0]; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t e = 0; e < width; ++e)
        out.data<double>()[(b * n + i) * width + e] = x.data<double>()[(b * s + rows[i]) * width + e];
  return out;
}
Tensor scatter_rows(const Tensor& x, const std::vector<int64_t>& rows, int64_t s) {
  Shape shape = x.shape();
  const int64_t n = shape[1], width = x.numel() / (shape[0] * std::max<int64_t>(n, 1));
  shape[1] = s;
  Tensor out = Tensor::zeros(shape, DType::f64);
  for (int64_t b = 0; b < shape[0]; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t e = 0; e < width; ++e)
        out.data<double>()[(b * s + rows[i]) * width + e] = x.data<double>()[(b * n + i) * width + e];
  return out;
}

// Causal attention over each row, or over each packed sequence of it (in a
// sliding window, if the model has one); padding rows are cut out first and
// their output is zero.
Tensor core_attention(const GptDims& d, const Qkv& qkv) {
  if (d.seq_lens.empty()) return attention_forward(qkv.q, qkv.k, qkv.v, true, {d.window}).out;
  if (d.seq_rows.empty()) return packed_attention_forward(qkv.q, qkv.k, qkv.v, d.seq_lens, d.window).out;
  const std::vector<int64_t> rows = token_rows(d);
  const Tensor out = packed_attention_forward(gather_rows(qkv.q, rows), gather_rows(qkv.k, rows),
                                              gather_rows(qkv.v, rows), d.seq_lens, d.window)
                         .out;
  return scatter_rows(out, rows, qkv.q.dim(1));
}
AttentionGradients core_attention_backward(const GptDims& d, const Qkv& qkv, const Tensor& dout) {
  if (d.seq_lens.empty()) return attention_backward(qkv.q, qkv.k, qkv.v, dout, true, {d.window});
  if (d.seq_rows.empty()) return packed_attention_backward(qkv.q, qkv.k, qkv.v, dout, d.seq_lens, d.window);
  const std::vector<int64_t> rows = token_rows(d);
  AttentionGradients g =
      packed_attention_backward(gather_rows(qkv.q, rows), gather_rows(qkv.k, rows), gather_rows(qkv.v, rows),
                                gather_rows(dout, rows), d.seq_lens, d.window);
  const int64_t s = qkv.q.dim(1);
  g.dq = scatter_rows(g.dq, rows, s), g.dk = scatter_rows(g.dk, rows, s), g.dv = scatter_rows(g.dv, rows, s);
  return g;
}

// The attention sublayer: y = x + Wo attention(split(LN1(x) Wqkv + bqkv)) + bo.
Tensor attention_sublayer(const GptDims& d, const GptLayer& p, const Tensor& x) {
  const Tensor a = layernorm_forward(x, p.ln1_gamma, p.ln1_beta, d.eps).y;
  const Qkv qkv = split_heads(linear_forward(a, p.wqkv, p.bqkv), layout_of(d));
  Tensor o = core_attention(d, qkv);  // [B, s, H, dv]
  Shape flat = x.shape();
  flat.back() = d.heads * d.dv();
  return add(x, linear_forward(o.reshape(flat), p.wo, p.bo));
}

// dy -> dx, accumulating the sublayer's parameter gradients into g.
Tensor attention_sublayer_backward(const GptDims& d, const GptLayer& p, const Tensor& x, const Tensor& dy,
                                   GptLayer& g) {
  const Tensor a = layernorm_forward(x, p.ln1_gamma, p.ln1_beta, d.eps).y;
  const Tensor packed = linear_forward(a, p.wqkv, p.bqkv);
  const Qkv qkv = split_heads(packed, layout_of(d));
  const Tensor o = core_attention(d, qkv);
  Shape flat = x.shape();
  flat.back() = d.heads * d.dv();
  const LinearGrads out = linear_backward(dy, o.reshape(flat), p.wo);
  const AttentionGradients att = core_attention_backward(d, qkv, out.dx.reshape(o.shape()));
  const LinearGrads in =
      linear_backward(merge_heads({att.dq, att.dk, att.dv}, layout_of(d), packed.shape()), a, p.wqkv);
  const LayerNormGrads ln = layernorm_backward(in.dx, x, p.ln1_gamma, d.eps);
  g.wo = out.dw, g.bo = out.db, g.wqkv = in.dw, g.bqkv = in.db, g.ln1_gamma = ln.dgamma, g.ln1_beta = ln.dbeta;
  return add(dy, ln.dx);
}

// The feed-forward sublayer: x + MLP(LN2(x)) or x + MoE(LN2(x)).
// routing (optional): where a MoE layer sent each token.
Tensor ffn_sublayer(const GptDims& d, const MoeConfig& moe_config, const GptLayer& p, const Tensor& x,
                    MoeRouting* routing = nullptr) {
  if (!p.is_moe) return mlp_forward(x, {p.ln2_gamma, p.ln2_beta, p.w1, p.b1, p.w2, p.b2}, d.eps);
  const Tensor a = layernorm_forward(x, p.ln2_gamma, p.ln2_beta, d.eps).y;
  const int64_t tokens = rows_of(a);
  MoeResult moe = moe_forward(a.reshape({tokens, d.hidden}), p.moe, moe_config);
  if (routing) *routing = std::move(moe.routing);
  return add(x, moe.y.reshape(x.shape()));
}

Tensor ffn_sublayer_backward(const GptDims& d, const MoeConfig& moe_config, const GptLayer& p, const Tensor& x,
                             const Tensor& dy, GptLayer& g) {
  if (!p.is_moe) {
    MlpGrads m = mlp_backward(dy, x, {p.ln2_gamma, p.ln2_beta, p.w1, p.b1, p.w2, p.b2}, d.eps);
    g.ln2_gamma = m.dln_gamma, g.ln2_beta = m.dln_beta, g.w1 = m.dw1, g.b1 = m.db1, g.w2 = m.dw2, g.b2 = m.db2;
    return m.dx;
  }
  const Tensor a = layernorm_forward(x, p.ln2_gamma, p.ln2_beta, d.eps).y;
  const int64_t tokens = rows_of(a);
  MoeGradients m =
      moe_backward(as_f64(dy).reshape({tokens, d.hidden}), a.reshape({tokens, d.hidden}), p.moe, moe_config);
  const LayerNormGrads ln = layernorm_backward(m.dx.reshape(x.shape()), x, p.ln2_gamma, d.eps);
  g.moe.router = m.drouter, g.moe.w1 = m.dw1, g.moe.w2 = m.dw2, g.ln2_gamma = ln.dgamma, g.ln2_beta = ln.dbeta;
  return add(dy, ln.dx);
}

struct Batch {
  std::vector<int64_t> inputs, targets;
};
Batch split_tokens(std::span<const int64_t> tokens, int64_t batch, int64_t seq) {
  Batch b;
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t t = 0; t < seq; ++t) {
      b.inputs.push_back(tokens[i * (seq + 1) + t]);
      b.targets.push_back(tokens[i * (seq + 1) + t + 1]);
    }
  return b;
}

}  // namespace

GptStep gpt_forward_backward(const GptDims& d, const GptParams& p, std::span<const int64_t> tokens, int64_t batch) {
  const Batch b = split_tokens(tokens, batch, d.seq);
  return gpt_forward_backward(d, p, b.inputs, b.targets, batch);
}

double gpt_loss(const GptDims& d, const GptParams& p, std::span<const int64_t> tokens, int64_t batch) {
  const Batch b = split_tokens(tokens, batch, d.seq);
  return gpt_loss(d, p, b.inputs, b.targets, batch);
}

GptStep gpt_forward_backward(const GptDims& d, const GptParams& p, std::span<const int64_t> inputs,
                             std::span<const int64_t> targets, int64_t batch, const RoutingFollow* follow) {
  const Batch b{{inputs.begin(), inputs.end()}, {targets.begin(), targets.end()}};
  GptStep step;
  // Each layer's MoE config: the shared one, and the routing it follows.
  std::vector<MoeConfig> moe_configs(p.layers.size(), d.moe);
  if (follow) {
    size_t moe_layer = 0;
    for (size_t l = 0; l < p.layers.size(); ++l) {
      if (!p.layers[l].is_moe) continue;
      if (moe_layer >= follow->expert.size())
        throw RuntimeError(cat("ref::gpt_forward_backward: the routing to follow has ", follow->expert.size(),
                               " MoE layers, the model more"));
      moe_configs[l].follow = &follow->expert[moe_layer++];
      moe_configs[l].tie_band = follow->tie_band;
    }
  }
  // Forward, keeping each sublayer's input.
  std::vector<Tensor> sublayer_inputs;  // [2 L] inputs of the attention / ffn sublayers
  Tensor x = embedding_forward(b.inputs, p.embedding).reshape({batch, d.seq, d.hidden});
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const GptLayer& layer = p.layers[l];
    sublayer_inputs.push_back(x);
    x = attention_sublayer(d, layer, x);
    sublayer_inputs.push_back(x);
    if (layer.is_moe) step.routing.emplace_back();
    x = ffn_sublayer(d, moe_configs[l], layer, x, layer.is_moe ? &step.routing.back() : nullptr);
  }
  const Tensor xf = layernorm_forward(x, p.lnf_gamma, p.lnf_beta, d.eps).y;
  const Tensor logits = linear_forward(xf, p.head);
  step.loss = cross_entropy_forward(logits, b.targets, Reduction::mean);
  // Backward, sublayer by sublayer in reverse.
  step.grads = p.zeros_like();
  GptParams& g = step.grads;
  const LinearGrads head = linear_backward(cross_entropy_backward(logits, b.targets, Reduction::mean), xf, p.head,
                                           /*has_bias=*/false);
  g.head = head.dw;
  const LayerNormGrads lnf = layernorm_backward(head.dx, x, p.lnf_gamma, d.eps);
  g.lnf_gamma = lnf.dgamma, g.lnf_beta = lnf.dbeta;
  Tensor dx = lnf.dx;
  for (int64_t l = d.layers - 1; l >= 0; --l) {
    dx = ffn_sublayer_backward(d, moe_configs[l], p.layers[l], sublayer_inputs[2 * l + 1], dx, g.layers[l]);
    dx = attention_sublayer_backward(d, p.layers[l], sublayer_inputs[2 * l], dx, g.layers[l]);
  }
  g.embedding = embedding_backward(b.inputs, dx.reshape({batch * d.seq, d.hidden}), d.vocab);
  return step;
}

double gpt_loss(const GptDims& d, const GptParams& p, std::span<const int64_t> inputs, std::span<const int64_t> targets,
                int64_t batch) {
  const Batch b{{inputs.begin(), inputs.end()}, {targets.begin(), targets.end()}};
  Tensor x = embedding_forward(b.inputs, p.embedding).reshape({batch, d.seq, d.hidden});
  for (const GptLayer& layer : p.layers) x = ffn_sublayer(d, d.moe, layer, attention_sublayer(d, layer, x));
  const Tensor logits = linear_forward(layernorm_forward(x, p.lnf_gamma, p.lnf_beta, d.eps).y, p.head);
  return cross_entropy_forward(logits, b.targets, Reduction::mean);
}

void gpt_adam_step(GptParams& params, GptParams& grads, GptAdam& s) {
  if (s.step == 0) {
    s.m = params.zeros_like();
    s.v = params.zeros_like();
  }
  ++s.step;
  std::vector<Tensor*> p = params.tensors(), g = grads.tensors(), m = s.m.tensors(), v = s.v.tensors();
  for (size_t i = 0; i < p.size(); ++i) {
    *p[i] = as_f64(*p[i]);
    adam_step(*p[i], *g[i], *m[i], *v[i], s.step, s.config);
  }
}

}  // namespace sextant::ref
