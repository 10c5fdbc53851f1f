// Conformance (docs/CONFORMANCE.md): the layer output, the input gradient, the router
// weight gradient and every expert weight gradient (gathered from their EP x
// ETP shards; EDP replicas must agree bit for bit), plus the aux and z loss
// values, against the float64 reference, with the same kernel on one rank
// (all experts local) setting the bound. The routing itself must equal the
// reference's: every token whose experts or kept slots differ is reported by
// number and fails the case, and the per-expert loads and the dropped count
// are exact checks.
#include <algorithm>
#include <tuple>

#include "harness/assemble.h"
#include "harness/strings.h"
#include "reference/moe.h"
#include "suites/moe/moe.h"

namespace sextant::moe_suite {

namespace {

struct Results {
  Tensor y, dx, router, w1, w2;
  double aux_loss = 0, z_loss = 0;
  Tensor routing;  // the one-rank run's [T, 2k] table (baseline only)
};

Tensor gather(State& s, Checker& checker, const std::string& name, const std::vector<Block>& blocks,
              const Shape& global, DType dtype) {
  Assembled a = assemble(*s.host, blocks, global, dtype);
  if (checker.is_root() && (a.uncovered || a.mismatched))
    checker.fail(cat(name, ": ", a.uncovered, " elements uncovered, ", a.mismatched,
                     " elements where replicas (EDP, or the router's) disagree"));
  return a.tensor;
}

// This rank's slots as a [T_local, 2k] f64 table: expert, kept.
Tensor routing_table(const moe::SlotTable& slots) {
  Tensor t = Tensor::empty({slots.tokens, 2 * slots.topk}, DType::f64);
  for (int64_t i = 0; i < slots.slots(); ++i) {
    t.data<double>()[2 * i] = slots.expert[i];
    t.data<double>()[2 * i + 1] = slots.kept[i];
  }
  return t;
}

// Collective: the distributed results, whole, on the root.
Results gather_results(State& s, Checker& checker, Tensor& routing) {
  const Problem& p = s.problem;
  const DType dtype = s.config.dtype;
  Results r;
  r.y = gather(s, checker, "y", {block_along(s.y, 0, s.token0)}, {p.tokens, p.hidden}, dtype);
  r.dx = gather(s, checker, "dx", {block_along(s.grads.dx, 0, s.token0)}, {p.tokens, p.hidden}, dtype);
  r.router = gather(s, checker, "router", {{s.grads.router, {0, 0}}}, {p.hidden, p.experts}, dtype);
  const int local = static_cast<int>(s.grads.w1.size());
  const int64_t f = p.ffn / s.etp->size(), f0 = s.etp->rank() * f;
  std::vector<Block> w1, w2;
  for (int l = 0; l < local; ++l) {
    const int64_t e = s.ep->rank() * local + l;
    w1.push_back({s.grads.w1[l].reshape({1, p.hidden, f}), {e, 0, f0}});
    w2.push_back({s.grads.w2[l].reshape({1, f, p.hidden}), {e, f0, 0}});
  }
  r.w1 = gather(s, checker, "w1", w1, {p.experts, p.hidden, p.ffn}, dtype);
  r.w2 = gather(s, checker, "w2", w2, {p.experts, p.ffn, p.hidden}, dtype);
  routing = gather(s, checker, "routing", {block_along(routing_table(s.layer->routing().slots), 0, s.token0)},
                   {p.tokens, 2 * p.topk}, DType::f64);
  r.aux_loss = s.layer->routing().aux_loss;
  r.z_loss = s.layer->routing().z_loss;
  return r;
}

Tensor on_host(const Tensor& t) { return t.is_host() ? t : t.to(Device::host); }

// The same kernel on one rank of the run's device: every expert local, the
// whole batch, no fault; results in host memory.
Results baseline(State& s, const Tensor& x, const Tensor& dy) {
  const Problem& p = s.problem;
  moe::MoeWeights w{on_device(s.router, s.device), {}, {}};
  for (int e = 0; e < p.experts; ++e) {
    w.w1.push_back(on_device(expert_block(p, false, e, 0, 1, s.config.dtype, s.seed), s.device));
    w.w2.push_back(on_device(expert_block(p, true, e, 0, 1, s.config.dtype, s.seed), s.device));
  }
  const moe::MoeOptions o{p.router(s.local_tokens), p.dispatcher, p.transport, {}};
  moe::MoeLayer layer(o, {s.self, s.self, s.self, s.self}, std::move(w));
  Results r;
  r.y = on_host(layer.forward(on_device(x, s.device)));
  moe::MoeGrads g = layer.backward(on_device(dy, s.device));
  r.dx = on_host(g.dx);
  r.router = on_host(g.router);
  for (Tensor& t : g.w1) t = on_host(t).reshape({1, p.hidden, p.ffn});
  for (Tensor& t : g.w2) t = on_host(t).reshape({1, p.ffn, p.hidden});
  r.w1 = concat(g.w1, 0);
  r.w2 = concat(g.w2, 0);
  r.aux_loss = layer.routing().aux_loss;
  r.z_loss = layer.routing().z_loss;
  r.routing = routing_table(layer.routing().slots);
  return r;
}

// A [T, 2k] routing table with each token's (expert, kept) pairs in
// ascending order: the form in which two routings compare as sets.
Tensor sorted_routing(const Tensor& table, int topk) {
  Tensor out = table.clone();
  double* v = out.data<double>();
  for (int64_t t = 0; t < table.dim(0); ++t) {
    std::vector<std::pair<double, double>> pairs;
    for (int j = 0; j < topk; ++j) pairs.push_back({v[t * 2 * topk + 2 * j], v[t * 2 * topk + 2 * j + 1]});
    std::sort(pairs.begin(), pairs.end());
    for (int j = 0; j < topk; ++j) std::tie(v[t * 2 * topk + 2 * j], v[t * 2 * topk + 2 * j + 1]) = pairs[j];
  }
  return out;
}

Tensor routing_table(const ref::MoeRouting& r) {
  Tensor t = Tensor::empty({r.tokens, 2 * r.topk}, DType::f64);
  for (int64_t i = 0; i < r.tokens * r.topk; ++i) {
    t.data<double>()[2 * i] = r.expert[i];
    t.data<double>()[2 * i + 1] = r.kept[i] ? 1 : 0;
  }
  return t;
}

ref::MoeConfig ref_config(const Problem& p, int64_t capacity_group) {
  ref::MoeConfig c;
  c.experts = p.experts;
  c.topk = p.topk;
  c.pre_softmax = p.pre_softmax;
  c.drop = p.drop == moe::DropPolicy::none          ? ref::MoeDrop::none
           : p.drop == moe::DropPolicy::probability ? ref::MoeDrop::probability
                                                    : ref::MoeDrop::position;
  c.capacity_factor = p.capacity_factor;
  c.capacity_group = capacity_group;
  c.aux_coeff = p.aux_coeff;
  c.z_coeff = p.z_coeff;
  return c;
}

// Tokens whose set of (expert, kept) slots differs from the reference's.
std::vector<int64_t> routing_differences(const Tensor& table, const ref::MoeRouting& want) {
  const Tensor got = sorted_routing(table, want.topk), ref = sorted_routing(routing_table(want), want.topk);
  const int64_t width = 2 * want.topk;
  std::vector<int64_t> tokens;
  for (int64_t t = 0; t < want.tokens; ++t)
    if (!std::equal(got.data<double>() + t * width, got.data<double>() + (t + 1) * width,
                    ref.data<double>() + t * width))
      tokens.push_back(t);
  return tokens;
}

Tensor scalar(double v) { return Tensor::from_values({1}, {v}, DType::f64); }

void check_routing(State& s, Checker& checker, const Tensor& table, const ref::MoeRouting& want,
                   const std::vector<double>& load, double dropped, int64_t redrawn) {
  const std::vector<int64_t> differ = routing_differences(table, want);
  if (!differ.empty()) {
    const std::vector<int64_t> first(differ.begin(), differ.begin() + std::min<size_t>(differ.size(), 32));
    checker.note("routing_differs", {{"tokens", differ.size()}, {"first", first}});
    checker.fail(cat("routing differs from the reference for ", differ.size(), " of ", want.tokens,
                     " tokens (first: ", join(first, ", "), ")"));
  }
  int64_t wrong = 0;
  for (size_t e = 0; e < load.size(); ++e) wrong += static_cast<int64_t>(load[e]) != want.load[e];
  checker.exact("tokens_per_expert", wrong, static_cast<int64_t>(load.size()));
  checker.exact("dropped_slots", static_cast<int64_t>(dropped) != want.dropped, 1);
  checker.note("redrawn_rows", redrawn);
  checker.note("expert_load", want.load);
  checker.note("dropped_slots", want.dropped);
  if (s.problem.drop != moe::DropPolicy::none)
    checker.note("capacity",
                 moe::expert_capacity(s.local_tokens, s.problem.topk, s.problem.experts, s.problem.capacity_factor));
}

}  // namespace

void check(State& s, Checker& checker) {
  run_forward_backward(s);
  Tensor table;
  const Results dist = gather_results(s, checker, table);
  // Per-expert kept slots and dropped slots, summed over the ranks.
  const moe::SlotTable& slots = s.layer->routing().slots;
  std::vector<double> load(static_cast<size_t>(s.problem.experts) + 1, 0.0);
  for (int64_t i = 0; i < slots.slots(); ++i) {
    if (slots.kept[i]) load[slots.expert[i]] += 1;
    else load.back() += 1;
  }
  s.host->all_reduce(load.data(), load.data(), load.size(), DType::f64, ReduceOp::sum);
  const int64_t redrawn = s.host->all_reduce_count(s.redrawn_rows);
  if (!checker.is_root()) return;

  const Problem& p = s.problem;
  const DType dtype = s.config.dtype;
  std::vector<Tensor> groups;  // x as every rank drew it, capacity group by group
  for (int64_t row0 = 0; row0 < p.tokens; row0 += s.local_tokens)
    groups.push_back(token_rows(p, row0, s.local_tokens, s.router, dtype, s.seed));
  const Tensor x = concat(groups, 0);
  const Tensor dy = token_block(p, "moe.dy", 0, p.tokens, dtype, s.seed);
  const Results base = baseline(s, x, dy);
  std::vector<Tensor> w1, w2;
  for (int e = 0; e < p.experts; ++e) {
    w1.push_back(expert_block(p, false, e, 0, 1, dtype, s.seed).reshape({1, p.hidden, p.ffn}));
    w2.push_back(expert_block(p, true, e, 0, 1, dtype, s.seed).reshape({1, p.ffn, p.hidden}));
  }
  const ref::MoeParams params{s.router, concat(w1, 0), concat(w2, 0)};
  // Every input, so that the case can be recomputed from its dump.
  for (auto [name, t] :
       {std::pair{"x", &x}, {"dy", &dy}, {"router", &params.router}, {"w1", &params.w1}, {"w2", &params.w2}})
    checker.input(name, *t);
  const ref::MoeConfig config = ref_config(p, s.local_tokens);
  const ref::MoeResult fwd = ref::moe_forward(x, params, config);
  const ref::MoeGradients grads = ref::moe_backward(dy, x, params, config);

  const double dropped = load.back();
  load.pop_back();
  check_routing(s, checker, table, fwd.routing, load, dropped, redrawn);
  // The routing tables beside the checked tensors, so that a recomputation can check them exactly.
  checker.input("routing.dist", sorted_routing(table, p.topk));
  checker.input("routing.base", sorted_routing(base.routing, p.topk));
  checker.input("routing.ref", sorted_routing(routing_table(fwd.routing), p.topk));
  checker.compare("y", OpClass::linear, dist.y, base.y, fwd.y);
  checker.compare("dx", OpClass::linear, dist.dx, base.dx, grads.dx);
  checker.compare("d_router", OpClass::linear, dist.router, base.router, grads.drouter);
  checker.compare("d_w1", OpClass::linear, dist.w1, base.w1, grads.dw1);
  checker.compare("d_w2", OpClass::linear, dist.w2, base.w2, grads.dw2);
  if (p.aux_coeff > 0)
    checker.compare("aux_loss", OpClass::loss, scalar(dist.aux_loss), scalar(base.aux_loss), scalar(fwd.aux_loss));
  if (p.z_coeff > 0)
    checker.compare("z_loss", OpClass::loss, scalar(dist.z_loss), scalar(base.z_loss), scalar(fwd.z_loss));
}

}  // namespace sextant::moe_suite
