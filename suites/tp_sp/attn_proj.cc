// Case tp_sp/attn_proj: the projections of a pre-LN attention sublayer --
// LN -> QKV column-parallel (split by heads) -> core -> output row-parallel
// -> residual -- with the core replaced by the token-local token_mix, so the
// projections alone are under test (kernels/tensor_parallel/attention_proj.h);
// the projections in the test dtype or in FP8 (the reference unquantized).
#include "kernels/ops/random.h"
#include "kernels/tensor_parallel/attention_proj.h"
#include "kernels/tensor_parallel/regions.h"
#include "kernels/tensor_parallel/shard.h"
#include "reference/layernorm.h"
#include "reference/linear.h"
#include "suites/tp_sp/token_mix.h"
#include "suites/tp_sp/tp_sp.h"

namespace sextant::tp_sp {
namespace {

const char* kPrefix = "tp_sp.attn_proj";

struct AttnState {
  Env env;
  tp::AttentionProjWeights w;
  Tensor x, dy;  // [b/dp, s/tp | s, h]
  Tensor y, dx;
  tp::AttentionProjGrads grads;
  size_t activation_bytes = 0, layernorm_bytes = 0;
};

tp::AttentionDims dims_of(const Problem& p) { return {p.hidden, p.heads, p.hidden / p.heads}; }
Shape activation_shape(const Problem& p) { return {p.batch, p.seq, p.hidden}; }
RandomSpec spec(const Env& e, const char* name) { return {e.seed, tensor_id(std::string(kPrefix) + name), 1.0}; }

// FP8: the per-tensor decode scales of the last step.
Fp8Scales scales_of(const tp::AttentionProjWeights& w) {
  return fp8_scales({{"qkv", w.qkv.fp8.get()}, {"out", w.out.fp8.get()}});
}

struct Outputs {
  Tensor y, dx;
  tp::AttentionProjGrads grads;
  size_t activation_bytes = 0, layernorm_bytes = 0;
};

// Forward + backward of the sublayer with its residual (no gradient reductions).
Outputs run_sublayer(const tp::TpGroup& g, const tp::AttentionProjWeights& w, const Tensor& x, const Tensor& dy) {
  Outputs out;
  tp::AttentionProjSaved saved;
  tp::Qkv qkv = tp::qkv_forward(g, w, x, saved);                           // [b, s, heads/tp, d] each
  Tensor o = token_mix_forward(qkv);                                       // the core
  out.y = tp::out_proj_forward(g, w, o, saved);                            // [b, s/tp | s, h]
  tp::add_into(out.y, x);                                                  // residual
  out.activation_bytes = saved.bytes() + qkv.q.nbytes() + qkv.k.nbytes();  // + what the core keeps
  out.layernorm_bytes = saved.layernorm_bytes();
  Tensor d_o = tp::out_proj_backward(g, w, saved, dy, out.grads);  // [b, s, heads/tp, d]
  out.dx = tp::qkv_backward(g, w, saved, token_mix_backward(qkv, d_o), out.grads);
  tp::add_into(out.dx, dy);  // residual
  return out;
}

void fwd_bwd(AttnState& s) {
  Outputs out = run_sublayer(*s.env.tp, s.w, s.x, s.dy);
  tp::reduce_sequence_parallel_grads(*s.env.tp, out.grads.replicated_over_tp());
  tp::all_reduce_grads(*s.env.dp, out.grads.all());
  s.y = out.y;
  s.dx = out.dx;
  s.grads = out.grads;
  s.activation_bytes = out.activation_bytes;
  s.layernorm_bytes = out.layernorm_bytes;
}

AttnState setup(CaseContext& ctx) {
  AttnState s;
  s.env = make_env(ctx);
  const Problem& p = s.env.p;
  const Placement& at = s.env.at;
  s.w = tp::init_attention_proj_weights(dims_of(p), at.tp_rank, p.tp, s.env.dtype, s.env.seed, kPrefix, s.env.device);
  if (p.fp8) tp::use_fp8_linears(s.w, *p.fp8);
  const Shape local{at.batch, at.seq, p.hidden};
  s.x = ops::random_block(activation_shape(p), at.offset(), local, s.env.dtype, spec(s.env, ".x"), s.env.device);
  s.dy = ops::random_block(activation_shape(p), at.offset(), local, s.env.dtype, spec(s.env, ".dy"), s.env.device);
  return s;
}

// The float64 reference of the sublayer, composed of reference/ pieces.
struct Reference {
  Tensor y, dx, dln_gamma, dln_beta, dwqkv, dbqkv, dwo, dbo;
};
// qkv: [b, s, heads * 3 * d] with columns (head, {q, k, v}, d) <-> part c of each head: [b, s, heads, d].
Tensor qkv_part(const Tensor& qkv, int64_t heads, int64_t d, int c) {
  const int64_t tokens = qkv.dim(0) * qkv.dim(1);
  Tensor part = Tensor::empty({qkv.dim(0), qkv.dim(1), heads, d}, DType::f64);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t n = 0; n < heads; ++n)
      for (int64_t j = 0; j < d; ++j)
        part.set((t * heads + n) * d + j, qkv.at(t * heads * 3 * d + (n * 3 + c) * d + j));
  return part;
}
Tensor qkv_pack(const Tensor parts[3]) {
  const int64_t b = parts[0].dim(0), s = parts[0].dim(1), heads = parts[0].dim(2), d = parts[0].dim(3);
  Tensor qkv = Tensor::empty({b, s, heads * 3 * d}, DType::f64);
  for (int64_t t = 0; t < b * s; ++t)
    for (int64_t n = 0; n < heads; ++n)
      for (int c = 0; c < 3; ++c)
        for (int64_t j = 0; j < d; ++j)
          qkv.set(t * heads * 3 * d + (n * 3 + c) * d + j, parts[c].at((t * heads + n) * d + j));
  return qkv;
}

Reference reference(const Tensor& x, const Tensor& dy, const tp::AttentionProjWeights& w, int64_t heads) {
  const int64_t d = w.head_dim, b = x.dim(0), s = x.dim(1);
  Reference r;
  // Forward: ln, qkv, o = q * k + v, y = x + o Wo + bo.
  const Tensor ln = ref::layernorm_forward(x, w.ln_gamma, w.ln_beta).y;
  const Tensor qkv = ref::linear_forward(ln, w.qkv.w, w.qkv.b);
  const Tensor q = qkv_part(qkv, heads, d, 0), k = qkv_part(qkv, heads, d, 1), v = qkv_part(qkv, heads, d, 2);
  const Tensor o = token_mix_forward_f64(q, k, v).reshape({b, s, heads * d});
  r.y = ref::linear_forward(o, w.out.w, w.out.b);
  for (int64_t i = 0; i < r.y.numel(); ++i) r.y.set(i, r.y.at(i) + x.at(i));
  // Backward, in reverse.
  const ref::LinearGrads g_out = ref::linear_backward(dy, o, w.out.w);
  Tensor dparts[3];
  token_mix_backward_f64(q, k, g_out.dx.reshape({b, s, heads, d}), dparts[0], dparts[1], dparts[2]);
  const ref::LinearGrads g_qkv = ref::linear_backward(qkv_pack(dparts), ln, w.qkv.w);
  const ref::LayerNormGrads g_ln = ref::layernorm_backward(g_qkv.dx, x, w.ln_gamma);
  r.dx = g_ln.dx;
  for (int64_t i = 0; i < r.dx.numel(); ++i) r.dx.set(i, r.dx.at(i) + dy.at(i));
  r.dln_gamma = g_ln.dgamma;
  r.dln_beta = g_ln.dbeta;
  r.dwqkv = g_qkv.dw;
  r.dbqkv = g_qkv.db;
  r.dwo = g_out.dw;
  r.dbo = g_out.db;
  return r;
}

void check(AttnState& s, Checker& checker) {
  const Problem& p = s.env.p;
  if (p.fp8) tp::use_fp8_linears(s.w, *p.fp8);  // fresh: the baseline runs as many steps from the same state
  for (int step = 0; step < checked_steps(p); ++step) fwd_bwd(s);
  const Placement& at = s.env.at;
  Reference r;
  Outputs base;
  Fp8Scales base_scales;
  if (checker.is_root()) {
    const Tensor x = random_tensor(activation_shape(p), s.env.dtype, spec(s.env, ".x"));
    const Tensor dy = random_tensor(activation_shape(p), s.env.dtype, spec(s.env, ".dy"));
    const auto full = tp::init_attention_proj_weights(dims_of(p), 0, 1, s.env.dtype, s.env.seed, kPrefix);
    checker.input("x", x);
    checker.input("dy", dy);
    for (auto [name, t] : {std::pair{"ln_gamma", &full.ln_gamma},
                           {"ln_beta", &full.ln_beta},
                           {"w_qkv", &full.qkv.w},
                           {"b_qkv", &full.qkv.b},
                           {"w_out", &full.out.w},
                           {"b_out", &full.out.b}})
      checker.input(name, *t);
    r = reference(x, dy, full, p.heads);
    // The baseline: the same kernels on this rank's device, then to host memory.
    const Device device = s.env.device;
    auto weights = device == Device::host
                       ? full
                       : tp::init_attention_proj_weights(dims_of(p), 0, 1, s.env.dtype, s.env.seed, kPrefix, device);
    if (p.fp8) tp::use_fp8_linears(weights, *p.fp8);
    for (int step = 0; step < checked_steps(p); ++step)
      base = run_sublayer(baseline_group(s.env), weights, on_device(x, device), on_device(dy, device));
    if (p.fp8) base_scales = scales_of(weights);
    move_to_host({&base.y, &base.dx});
    move_to_host(base.grads.all());
  }
  const Shape act = activation_shape(p);
  const int64_t width = p.hidden;  // heads * head_dim
  const int64_t qkv_offset = 3 * width / p.tp * at.tp_rank, out_offset = width / p.tp * at.tp_rank;
  // FP8 paths: the core multiplies q by k, so its output carries the QKV
  // forward's casts twice, and dq, dk carry it once beside the output's dgrad.
  const Env& e = s.env;
  const Fp8Casts to_o = fp8_path({kFp8Forward, kFp8Forward});
  const Fp8Casts to_dqkv = fp8_path({kFp8Dgrad, kFp8Forward});
  const Fp8Casts to_dx = fp8_path({to_dqkv, kFp8Dgrad});
  check_gathered(checker, "y", tensor_bound(e, OpClass::linear, fp8_path({to_o, kFp8Forward})), {{s.y, at.offset()}},
                 act, base.y, r.y);
  check_gathered(checker, "dx", tensor_bound(e, OpClass::norm, to_dx), {{s.dx, at.offset()}}, act, base.dx, r.dx);
  check_gathered(checker, "dln_gamma", tensor_bound(e, OpClass::norm, to_dx), {block_along(s.grads.ln_gamma, 0, 0)},
                 {p.hidden}, base.grads.ln_gamma, r.dln_gamma);
  check_gathered(checker, "dln_beta", tensor_bound(e, OpClass::norm, to_dx), {block_along(s.grads.ln_beta, 0, 0)},
                 {p.hidden}, base.grads.ln_beta, r.dln_beta);
  check_gathered(checker, "dw_qkv", tensor_bound(e, OpClass::linear, fp8_path({to_dqkv, kFp8Wgrad})),
                 {block_along(s.grads.qkv.dw, 1, qkv_offset)}, {p.hidden, 3 * width}, base.grads.qkv.dw, r.dwqkv);
  check_gathered(checker, "db_qkv", tensor_bound(e, OpClass::linear, to_dqkv),
                 {block_along(s.grads.qkv.db, 0, qkv_offset)}, {3 * width}, base.grads.qkv.db, r.dbqkv);
  check_gathered(checker, "dw_out", tensor_bound(e, OpClass::linear, fp8_path({to_o, kFp8Wgrad})),
                 {block_along(s.grads.out.dw, 0, out_offset)}, {width, p.hidden}, base.grads.out.dw, r.dwo);
  check_gathered(checker, "db_out", tensor_bound(e, OpClass::linear, {}), {block_along(s.grads.out.db, 0, 0)},
                 {p.hidden}, base.grads.out.db, r.dbo);
  if (p.fp8 && p.fp8->per_tensor()) check_fp8_scales(checker, scales_of(s.w).names, scales_of(s.w), base_scales);
}

Metrics metrics(AttnState& s, const RegionTimes& times) {
  const Problem& p = s.env.p;
  const size_t ln_out_bytes = static_cast<size_t>(s.env.at.batch * p.seq * p.hidden) * dtype_size(s.env.dtype);
  return block_metrics(s.env, times, tp::attention_proj_flops(p.tokens(), dims_of(p)), s.activation_bytes,
                       s.layernorm_bytes, bytes_of(s.grads.replicated_over_tp()), ln_out_bytes, true);
}

}  // namespace

CaseDef attn_proj_case() {
  return make_block_case(BlockCase<AttnState>{
      .name = "attn_proj",
      .summary = "attention projections (LN, QKV column-parallel by heads, token-local core, output row-parallel)",
      .parts = {.layernorm = true},
      .width = BlockWidth::heads,
      .fp8_linears = true,
      .kernel_faults = {KernelFault::layernorm_forward_variance, KernelFault::layernorm_backward_mean_term,
                        KernelFault::fp8_scale_inverse_twice},
      .table_metrics = {"tflops_per_rank", "activation_bytes_per_rank", "layernorm_activation_bytes_per_rank"},
      .setup = setup,
      .fwd_bwd = fwd_bwd,
      .check = check,
      .metrics = metrics,
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 20, attn_proj_case);

}  // namespace sextant::tp_sp
