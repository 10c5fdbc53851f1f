#include "kernels/model/gpt_params.h"

#include <cmath>

#include "harness/error.h"
#include "harness/rng.h"
#include "harness/strings.h"

namespace sextant::model {

namespace {

double inv_sqrt(int64_t n) { return 1.0 / std::sqrt(static_cast<double>(n)); }

ParamSpec replicated(std::string name, int64_t h, int layer, double mean, double scale, bool layernorm) {
  ParamSpec p{std::move(name), {h}, layer, mean, scale};
  p.sp_partial = true;
  p.is_layernorm = layernorm;
  return p;
}

ParamSpec split(std::string name, Shape shape, int layer, double scale, int tp_dim) {
  ParamSpec p{std::move(name), std::move(shape), layer, 0.0, scale};
  p.tp_dim = tp_dim;
  return p;
}

// LayerNorm gains near 1 (a fresh model's), biases small.
void add_layer(std::vector<ParamSpec>& out, const GptConfig& c, int l) {
  const std::string n = cat("layers.", l, ".");
  const int64_t h = c.hidden, o = c.heads * c.v_head_dim;
  const int64_t qkv = (c.heads + c.kv_heads) * c.head_dim + c.kv_heads * c.v_head_dim;
  out.push_back(replicated(n + "ln1_gamma", h, l, 1.0, 0.1, true));
  out.push_back(replicated(n + "ln1_beta", h, l, 0.0, 0.1, true));
  // Columns (KV group, {its query heads, k, v}): whole groups over TP.
  out.push_back(split(n + "wqkv", {h, qkv}, l, inv_sqrt(h), 1));
  out.push_back(split(n + "bqkv", {qkv}, l, 0.1, 0));
  out.push_back(split(n + "wo", {o, h}, l, inv_sqrt(o), 0));
  out.push_back(replicated(n + "bo", h, l, 0.0, 0.1, false));
  out.push_back(replicated(n + "ln2_gamma", h, l, 1.0, 0.1, true));
  out.push_back(replicated(n + "ln2_beta", h, l, 0.0, 0.1, true));
  if (!c.moe[l]) {
    out.push_back(split(n + "w1", {h, c.ffn}, l, inv_sqrt(h), 1));
    out.push_back(split(n + "b1", {c.ffn}, l, 0.1, 0));
    out.push_back(split(n + "w2", {c.ffn, h}, l, inv_sqrt(c.ffn), 0));
    out.push_back(replicated(n + "b2", h, l, 0.0, 0.1, false));
    return;
  }
  // Router logits of standard deviation ~1.2 on LayerNorm outputs: clear top-k margins.
  ParamSpec router{n + "router", {h, c.experts}, l, 0.0, 2.0 * inv_sqrt(h)};
  router.sp_partial = true;
  out.push_back(router);
  ParamSpec w1{n + "expert_w1", {c.experts, h, c.moe_ffn}, l, 0.0, inv_sqrt(h)};
  w1.expert = true, w1.etp_dim = 2, w1.group = GradGroup::expert;
  ParamSpec w2{n + "expert_w2", {c.experts, c.moe_ffn, h}, l, 0.0, inv_sqrt(c.moe_ffn)};
  w2.expert = true, w2.etp_dim = 1, w2.group = GradGroup::expert;
  out.push_back(w1);
  out.push_back(w2);
}

}  // namespace

std::vector<ParamSpec> param_specs(const GptConfig& c) {
  std::vector<ParamSpec> out;
  out.push_back(split("embedding", {c.vocab, c.hidden}, -1, 1.0, 0));
  for (int l = 0; l < c.layers; ++l) add_layer(out, c, l);
  out.push_back(replicated("lnf_gamma", c.hidden, -1, 1.0, 0.1, true));
  out.push_back(replicated("lnf_beta", c.hidden, -1, 0.0, 0.1, true));
  // Logits of standard deviation ~2 on LayerNorm outputs, as a trained LM's.
  out.push_back(split("head", {c.hidden, c.vocab}, -1, 3.5 * inv_sqrt(c.hidden), 1));
  return out;
}

Tensor init_block(const ParamSpec& p, uint64_t seed, const Shape& offset, const Shape& local, DType dtype) {
  Tensor t = random_block(p.shape, offset, local, DType::f64, RandomSpec{seed, tensor_id("gpt." + p.name), p.scale});
  double* v = t.data<double>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) v[i] += p.mean;
  return dtype == DType::f64 ? t : t.to(dtype);
}

int unit_of(const ParamSpec& p, int64_t layers) {
  if (p.layer >= 0) return p.layer + 1;
  return p.name == "embedding" ? 0 : static_cast<int>(layers) + 1;
}

Tensor init_global(const ParamSpec& p, uint64_t seed, DType dtype) {
  return init_block(p, seed, Shape(p.shape.size(), 0), p.shape, dtype);
}

std::vector<ParamBlock> blocks_of(const std::vector<ParamSpec>& specs, int index, const ParallelConfig& cfg,
                                  const RankCoords& at) {
  const ParamSpec& p = specs.at(static_cast<size_t>(index));
  Shape offset(p.shape.size(), 0), local = p.shape;
  auto cut = [&](int dim, int parts, int part) {
    if (local[dim] % parts != 0)
      throw RuntimeError(cat(p.name, ": dim ", dim, " of ", shape_string(p.shape), " does not split ", parts, " ways"));
    local[dim] /= parts;
    offset[dim] = local[dim] * part;
  };
  if (p.tp_dim >= 0) cut(p.tp_dim, cfg.tp, at.tp);
  if (!p.expert) return {ParamBlock{index, offset, local, -1}};
  cut(p.etp_dim, cfg.expert_tp(), at.etp);
  const int64_t local_experts = p.shape[0] / cfg.ep;
  std::vector<ParamBlock> out;
  for (int64_t e = 0; e < local_experts; ++e) {
    Shape o = offset, l = local;
    o[0] = at.ep * local_experts + e;
    l[0] = 1;
    out.push_back(ParamBlock{index, o, l, static_cast<int>(e)});
  }
  return out;
}

}  // namespace sextant::model
