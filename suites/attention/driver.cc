// The shared driver: setup (shards and communicators), the timed regions, and
// the case table of a Variant.
#include "harness/comm_wrappers.h"
#include "harness/error.h"
#include "suites/attention/attention.h"

namespace sextant::attention {

namespace {

// a2a+p2p: the a2a groups are a2a_size consecutive CP ranks, the kv (ring)
// groups the ranks with the same place in their a2a group (cp_attention.h).
void split_cp(State& s, int a2a_size) {
  const int c = s.cp_comm->rank();
  s.a2a_owned = s.cp_comm->split(c / a2a_size, c % a2a_size);
  s.kv_owned = s.cp_comm->split(c % a2a_size, c / a2a_size);
  s.comms = {s.a2a_owned.get(), s.kv_owned.get()};
}

// Traffic on the sub-groups counts as CP traffic: the harness reads the
// counters of the grid's communicators only.
void fold_traffic(State& s) {
  for (Communicator* sub : {s.a2a_owned.get(), s.kv_owned.get()}) {
    if (!sub) continue;
    CommStats& into = s.cp_comm->stats();
    for (const auto& [op, bytes] : sub->stats().bytes_sent) into.bytes_sent[op] += bytes;
    for (const auto& [op, calls] : sub->stats().calls) into.calls[op] += calls;
    sub->reset_stats();
  }
}

}  // namespace

State setup(const Variant& v, CaseContext& ctx) {
  State s;
  s.variant = &v;
  s.config = ctx.config;
  s.problem = Problem::of(ctx.config);
  s.seed = ctx.seed;
  s.device = ctx.device;
  s.host = &ctx.host_comm;
  s.self = &ctx.self;
  s.cp_comm = &ctx.grid.get(Dim::cp);
  RankCoords at = ctx.grid.coords();
  if (at.cp != s.cp_comm->rank()) throw RuntimeError("attention suite: CP communicator rank differs from the grid");
  s.shard = shard_of(s.problem, ctx.config.parallel, at);
  s.in = make_inputs(s.problem, s.shard, ctx.config.dtype, s.seed, s.device);
  if (v.split()) split_cp(s, s.problem.a2a_size);
  else if (v.a2a) s.comms.a2a = s.cp_comm;
  else s.comms.kv = s.cp_comm;
  if (s.comms.a2a) s.a2a_loop = std::make_unique<LoopbackCommunicator>(*s.comms.a2a);
  if (s.comms.kv) s.kv_loop = std::make_unique<LoopbackCommunicator>(*s.comms.kv);
  s.loop_comms = {s.a2a_loop.get(), s.kv_loop.get()};
  s.options.causal = s.problem.causal;
  s.options.window = s.problem.window;
  s.options.layout = s.problem.layout;
  s.options.seq = s.problem.rows();
  s.options.packing = s.problem.packing;
  s.options.kv_exchange = v.kv.value_or(cp::KvExchange::ring);
  s.options.fault = cp::faults().parse(ctx.config.fault);
  s.options.fault_magnitude = ctx.config.fault_magnitude;
  s.options.attention_impl = s.problem.attention_impl;
  return s;
}

void run_forward(State& s, const std::string& region) {
  RegionStats& r = s.regions[region];
  s.fwd = cp::cp_attention_forward(s.comms, s.options, s.in.q, s.in.k, s.in.v, &r.kernel);
  ++r.runs;
  fold_traffic(s);
}

void run_forward_backward(State& s, const std::string& region, bool compute_only) {
  RegionStats& r = s.regions[region];
  const cp::Comms& comms = compute_only ? s.loop_comms : s.comms;
  cp::Forward f = cp::cp_attention_forward(comms, s.options, s.in.q, s.in.k, s.in.v, &r.kernel);
  s.grads = cp::cp_attention_backward(comms, s.options, s.in.q, s.in.k, s.in.v, f.out, f.lse, s.in.dout, &r.kernel);
  ++r.runs;
  fold_traffic(s);
}

std::vector<FaultDoc> variant_faults(const Variant& v) {
  // Every fault that shows in some config of the variant: a causal zigzag
  // mask over two packed sequences and a kv group of two, with a sliding
  // window, and with KV heads replicated over a Ulysses group.
  return cp::faults().docs_where({cp::fault_site(v, 2, false, cp::Layout::contiguous, 0),
                                  cp::fault_site(v, 2, true, cp::Layout::zigzag, 2),
                                  cp::fault_site(v, 2, true, cp::Layout::zigzag, 0, ops::Window::causal(1)),
                                  cp::fault_site(v, 2, true, cp::Layout::zigzag, 0, {}, true)});
}

CaseDef make_attention_case(const Variant& v) {
  return make_case(CaseTable<State>{
      .suite = "attention",
      .name = v.name,
      .summary = v.summary,
      .options = attention_options(),
      .faults = variant_faults(v),
      .kernel_faults = {KernelFault::attention_forward_scale, KernelFault::attention_backward_softmax_grad,
                        KernelFault::attention_merge_lse, KernelFault::causal_mask_diagonal,
                        KernelFault::attention_gqa_head_map, KernelFault::attention_window_off_by_one,
                        KernelFault::attention_scale_from_v_dim},
      .table_metrics = {"tflops_per_rank", "load_balance", "overlap_efficiency"},
      .configs = [&v](const SweepRequest& req) { return sweep(v, req); },
      .validate = [&v](const CaseConfig& c) { validate(v, c); },
      .memory = attention_memory,
      .setup = [&v](CaseContext& ctx) { return setup(v, ctx); },
      .timed = {{"fwd", [](State& s) { run_forward(s, "fwd"); }},
                {"fwd_bwd", [](State& s) { run_forward_backward(s, "fwd_bwd", false); }},
                {"compute_only", [](State& s) { run_forward_backward(s, "compute_only", true); }}},
      .check = check,
      .metrics = metrics,
  });
}

}  // namespace sextant::attention
