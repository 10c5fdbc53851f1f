// The case: parameters, setup (shards, inputs with resolvable routing, the layer) and the
// timed region.
#include "harness/error.h"
#include "harness/strings.h"
#include "suites/moe/moe.h"

namespace sextant::moe_suite {

Problem Problem::of(const CaseConfig& c) {
  Problem p;
  p.dispatcher = moe::parse_dispatcher(c.s("dispatcher"));
  p.transport = moe::parse_transport(c.s("transport"));
  p.experts = static_cast<int>(c.i("experts"));
  p.topk = static_cast<int>(c.i("topk"));
  const std::optional<bool> skewed = find_named<bool>({{"uniform", false}, {"skewed", true}}, c.s("routing"));
  require(skewed.has_value(), cat("--set routing='", c.s("routing"), "' must be uniform or skewed"));
  p.skewed = *skewed;
  p.hot_experts = static_cast<int>(c.i("hot_experts"));
  p.skew = c.f("skew");
  p.drop = moe::parse_drop_policy(c.s("drop_policy"));
  p.capacity_factor = c.f("capacity_factor");
  p.pre_softmax = c.b("pre_softmax");
  p.tokens = c.i("tokens");
  p.hidden = c.i("hidden");
  p.ffn = c.i("ffn");
  p.aux_coeff = c.f("aux_coeff");
  p.z_coeff = c.f("z_coeff");
  return p;
}

moe::RouterOptions Problem::router(int64_t capacity_group) const {
  moe::RouterOptions o;
  o.experts = experts;
  o.topk = topk;
  o.pre_softmax = pre_softmax;
  o.drop = drop;
  o.capacity_factor = capacity_factor;
  o.capacity_group = capacity_group;
  o.aux_coeff = aux_coeff;
  o.z_coeff = z_coeff;
  return o;
}

Tensor on_device(const Tensor& t, Device device) { return t.device() == device ? t : t.to(device); }

State setup(CaseContext& ctx) {
  State s;
  s.config = ctx.config;
  s.problem = Problem::of(ctx.config);
  const Problem& p = s.problem;
  const DType dtype = ctx.config.dtype;
  s.seed = ctx.seed;
  s.host = &ctx.host_comm;
  s.self = &ctx.self;
  s.tokens = &ctx.comm;
  s.ep = &ctx.grid.get(Dim::ep);
  s.etp = &ctx.grid.get(Dim::etp);
  s.edp = &ctx.grid.get(Dim::edp);
  s.local_tokens = p.tokens / ctx.comm.size();
  s.token0 = ctx.comm.rank() * s.local_tokens;
  s.router = router_weights(p, dtype, s.seed);
  s.x = token_rows(p, s.token0, s.local_tokens, s.router, dtype, s.seed, &s.redrawn_rows);
  s.dy = token_block(p, "moe.dy", s.token0, s.local_tokens, dtype, s.seed);
  // The inputs are drawn on the host (resolvable routing is decided there), then
  // moved to the run's device with the weights; s.router stays on the host.
  s.device = ctx.device;
  s.x = on_device(s.x, s.device);
  s.dy = on_device(s.dy, s.device);

  moe::MoeWeights w{on_device(s.router, s.device), {}, {}};
  const int local = p.experts / s.ep->size();
  for (int l = 0; l < local; ++l) {
    const int e = s.ep->rank() * local + l;
    w.w1.push_back(on_device(expert_block(p, false, e, s.etp->rank(), s.etp->size(), dtype, s.seed), s.device));
    w.w2.push_back(on_device(expert_block(p, true, e, s.etp->rank(), s.etp->size(), dtype, s.seed), s.device));
  }
  moe::MoeOptions o{p.router(s.local_tokens), p.dispatcher, p.transport, moe::faults().parse(ctx.config.fault)};
  s.layer = std::make_unique<moe::MoeLayer>(o, moe::MoeComms{s.tokens, s.ep, s.etp, s.edp}, std::move(w));
  return s;
}

void run_forward_backward(State& s) {
  s.y = s.layer->forward(s.x);
  s.grads = s.layer->backward(s.dy);
  s.history.push_back(s.layer->times());
}

CaseDef layer_case() {
  return make_case(CaseTable<State>{
      .suite = "moe",
      .name = "layer",
      .summary = "MoE layer: router, token dispatch (alltoall / allgather) over EP, experts with ETP, fwd + bwd",
      .options = moe_options(),
      .faults = moe::faults().docs(),
      .kernel_faults = {KernelFault::router_topk_repeats, KernelFault::moe_permute_order,
                        KernelFault::moe_unpermute_order, KernelFault::moe_combine_twice,
                        KernelFault::gemm_ignores_beta, KernelFault::gelu_backward_coefficient},
      .table_metrics = {"dispatch_GBps", "imbalance_expert", "dropped_tokens", "a2a_share"},
      .configs = sweep,
      .validate = validate,
      .memory = moe_memory,
      .setup = setup,
      .timed = {{"fwd_bwd", run_forward_backward}},
      .check = check,
      .metrics = metrics,
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 10, layer_case);

}  // namespace sextant::moe_suite
