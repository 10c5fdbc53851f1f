// Case tp_sp/mlp: the pre-LN MLP block LN -> column linear -> GELU -> row
// linear -> residual (kernels/tensor_parallel/mlp.h) against reference/mlp.h,
// its linears in the test dtype or in FP8 (the reference unquantized).
#include "kernels/tensor_parallel/mlp.h"

#include "kernels/ops/random.h"
#include "kernels/tensor_parallel/regions.h"
#include "reference/mlp.h"
#include "suites/tp_sp/tp_sp.h"

namespace sextant::tp_sp {
namespace {

const char* kPrefix = "tp_sp.mlp";

struct MlpState {
  Env env;
  tp::MlpWeights w;  // this rank's shards
  Tensor x, dy;      // [b/dp, s/tp | s, h]
  // Results of the last fwd_bwd.
  Tensor y, dx;
  tp::MlpGrads grads;
  size_t activation_bytes = 0, layernorm_bytes = 0;
};

tp::MlpDims dims_of(const Problem& p) { return {p.hidden, p.ffn}; }
Shape activation_shape(const Problem& p) { return {p.batch, p.seq, p.hidden}; }
RandomSpec spec(const Env& e, const char* name) { return {e.seed, tensor_id(std::string(kPrefix) + name), 1.0}; }

// FP8: the per-tensor decode scales of the last step.
Fp8Scales scales_of(const tp::MlpWeights& w) {
  return fp8_scales({{"fc1", w.fc1.fp8.get()}, {"fc2", w.fc2.fp8.get()}});
}

// One training step of the block on this rank: forward, backward, and the
// gradient reductions (TP for replicated parameters under SP, then DP).
void fwd_bwd(MlpState& s) {
  const tp::TpGroup& g = *s.env.tp;
  tp::MlpSaved saved;
  s.y = tp::mlp_forward(g, s.w, s.x, saved);
  s.activation_bytes = saved.bytes();
  s.layernorm_bytes = saved.layernorm_bytes();
  s.dx = tp::mlp_backward(g, s.w, saved, s.dy, s.grads);
  tp::reduce_sequence_parallel_grads(g, s.grads.replicated_over_tp());
  tp::all_reduce_grads(*s.env.dp, s.grads.all());
}

MlpState setup(CaseContext& ctx) {
  MlpState s;
  s.env = make_env(ctx);
  const Problem& p = s.env.p;
  const Placement& at = s.env.at;
  s.w = tp::init_mlp_weights(dims_of(p), at.tp_rank, p.tp, s.env.dtype, s.env.seed, kPrefix, s.env.device);
  if (p.fp8) tp::use_fp8_linears(s.w, *p.fp8);
  const Shape local{at.batch, at.seq, p.hidden};
  s.x = ops::random_block(activation_shape(p), at.offset(), local, s.env.dtype, spec(s.env, ".x"), s.env.device);
  s.dy = ops::random_block(activation_shape(p), at.offset(), local, s.env.dtype, spec(s.env, ".dy"), s.env.device);
  return s;
}

void check(MlpState& s, Checker& checker) {
  const Problem& p = s.env.p;
  if (p.fp8) tp::use_fp8_linears(s.w, *p.fp8);  // fresh: the baseline runs as many steps from the same state
  for (int step = 0; step < checked_steps(p); ++step) fwd_bwd(s);
  const Placement& at = s.env.at;
  // Root: the whole problem in float64 and on one rank in the test dtype.
  ref::MlpActivations ref_fwd;
  ref::MlpGrads ref_bwd;
  Tensor base_y, base_dx;
  tp::MlpGrads base;
  Fp8Scales base_scales;
  if (checker.is_root()) {
    const Tensor x = random_tensor(activation_shape(p), s.env.dtype, spec(s.env, ".x"));
    const Tensor dy = random_tensor(activation_shape(p), s.env.dtype, spec(s.env, ".dy"));
    const tp::MlpWeights full = tp::init_mlp_weights(dims_of(p), 0, 1, s.env.dtype, s.env.seed, kPrefix);
    const ref::MlpParams params{full.ln_gamma, full.ln_beta, full.fc1.w, full.fc1.b, full.fc2.w, full.fc2.b};
    for (auto [name, t] : {std::pair{"x", &x},
                           {"dy", &dy},
                           {"ln_gamma", &params.ln_gamma},
                           {"ln_beta", &params.ln_beta},
                           {"w1", &params.w1},
                           {"b1", &params.b1},
                           {"w2", &params.w2},
                           {"b2", &params.b2}})
      checker.input(name, *t);
    ref_fwd = ref::mlp_forward_activations(x, params);
    ref_bwd = ref::mlp_backward(dy, x, params);
    // The baseline: the same kernels on this rank's device, then to host memory.
    const tp::TpGroup one = baseline_group(s.env);
    const Device device = s.env.device;
    tp::MlpWeights weights = device == Device::host
                                 ? full
                                 : tp::init_mlp_weights(dims_of(p), 0, 1, s.env.dtype, s.env.seed, kPrefix, device);
    if (p.fp8) tp::use_fp8_linears(weights, *p.fp8);
    for (int step = 0; step < checked_steps(p); ++step) {
      tp::MlpSaved saved;
      base_y = on_host(tp::mlp_forward(one, weights, on_device(x, device), saved));
      base_dx = on_host(tp::mlp_backward(one, weights, saved, on_device(dy, device), base));
    }
    move_to_host(base.all());
    if (p.fp8) base_scales = scales_of(weights);
  }
  const Shape act = activation_shape(p);
  const int64_t ffn_offset = p.ffn / p.tp * at.tp_rank;
  const Env& e = s.env;
  const Fp8Casts to_dx = fp8_path({kFp8Forward, kFp8Dgrad, kFp8Dgrad});  // fc1 forward (GELU'), fc2 then fc1 dgrad
  check_gathered(checker, "y", tensor_bound(e, OpClass::linear, fp8_path({kFp8Forward, kFp8Forward})),
                 {{s.y, at.offset()}}, act, base_y, ref_fwd.y);
  check_gathered(checker, "dx", tensor_bound(e, OpClass::norm, to_dx), {{s.dx, at.offset()}}, act, base_dx, ref_bwd.dx);
  check_gathered(checker, "dln_gamma", tensor_bound(e, OpClass::norm, to_dx), {block_along(s.grads.ln_gamma, 0, 0)},
                 {p.hidden}, base.ln_gamma, ref_bwd.dln_gamma);
  check_gathered(checker, "dln_beta", tensor_bound(e, OpClass::norm, to_dx), {block_along(s.grads.ln_beta, 0, 0)},
                 {p.hidden}, base.ln_beta, ref_bwd.dln_beta);
  check_gathered(checker, "dw1", tensor_bound(e, OpClass::linear, fp8_path({kFp8Forward, kFp8Dgrad, kFp8Wgrad})),
                 {block_along(s.grads.fc1.dw, 1, ffn_offset)}, {p.hidden, p.ffn}, base.fc1.dw, ref_bwd.dw1);
  check_gathered(checker, "db1", tensor_bound(e, OpClass::linear, fp8_path({kFp8Forward, kFp8Dgrad})),
                 {block_along(s.grads.fc1.db, 0, ffn_offset)}, {p.ffn}, base.fc1.db, ref_bwd.db1);
  check_gathered(checker, "dw2", tensor_bound(e, OpClass::linear, fp8_path({kFp8Forward, kFp8Wgrad})),
                 {block_along(s.grads.fc2.dw, 0, ffn_offset)}, {p.ffn, p.hidden}, base.fc2.dw, ref_bwd.dw2);
  check_gathered(checker, "db2", tensor_bound(e, OpClass::linear, {}), {block_along(s.grads.fc2.db, 0, 0)}, {p.hidden},
                 base.fc2.db, ref_bwd.db2);
  if (p.fp8 && p.fp8->per_tensor()) check_fp8_scales(checker, scales_of(s.w).names, scales_of(s.w), base_scales);
}

Metrics metrics(MlpState& s, const RegionTimes& times) {
  const Problem& p = s.env.p;
  const size_t elem = dtype_size(s.env.dtype);
  const size_t ln_out_bytes = static_cast<size_t>(s.env.at.batch * p.seq * p.hidden) * elem;  // fc1's gathered input
  return block_metrics(s.env, times, tp::mlp_flops(p.tokens(), dims_of(p)), s.activation_bytes, s.layernorm_bytes,
                       bytes_of(s.grads.replicated_over_tp()), ln_out_bytes, true);
}

}  // namespace

CaseDef mlp_case() {
  return make_block_case(BlockCase<MlpState>{
      .name = "mlp",
      .summary = "pre-LN MLP block (LN, column linear, GELU, row linear, residual) under TP / SP",
      .parts = {.layernorm = true},
      .width = BlockWidth::ffn,
      .fp8_linears = true,
      .kernel_faults = {KernelFault::layernorm_forward_variance, KernelFault::layernorm_backward_mean_term,
                        KernelFault::gelu_backward_coefficient, KernelFault::fp8_scale_inverse_twice},
      .table_metrics = {"tflops_per_rank", "activation_bytes_per_rank", "layernorm_activation_bytes_per_rank"},
      .setup = setup,
      .fwd_bwd = fwd_bwd,
      .check = check,
      .metrics = metrics,
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 10, mlp_case);

}  // namespace sextant::tp_sp
