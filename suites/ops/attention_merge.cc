// The LSE merge (kernels/ops/attention_block.h attention_merge): the keys cut
// into two blocks, each block's partial (out, lse) from the block op in f32,
// merged, against the whole-sequence reference. Under a causal mask the
// first rows see nothing of the second block (its LSE is -inf there).
#include "kernels/ops/attention_block.h"
#include "reference/attention.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

struct State {
  int64_t split = 0;
  bool causal = false;
  Tensor q, k, v;             // host inputs: [b, s, h, d]
  Tensor qd, k1, v1, k2, v2;  // on the device: the two key blocks
  ops::AttentionMask mask1, mask2;
  Tensor out, lse;  // merged, f32
};

std::vector<nlohmann::json> shapes(Profile profile) {
  std::vector<nlohmann::json> out = {{{"batch", 1}, {"seq", 2}, {"heads", 1}, {"head_dim", 4}, {"split", 1}},
                                     {{"batch", 2}, {"seq", 37}, {"heads", 3}, {"head_dim", 16}, {"split", 11}},
                                     {{"batch", 1}, {"seq", 130}, {"heads", 2}, {"head_dim", 32}, {"split", 64}}};
  if (profile == Profile::qualify)
    out.push_back({{"batch", 1}, {"seq", 2048}, {"heads", 8}, {"head_dim", 64}, {"split", 1000}});
  std::vector<nlohmann::json> both;
  for (nlohmann::json s : out)
    for (bool causal : {false, true}) {
      s["causal"] = causal;
      both.push_back(s);
    }
  return both;
}

State setup(CaseContext& ctx) {
  const CaseConfig& c = ctx.config;
  const int64_t b = c.i("batch"), s = c.i("seq"), h = c.i("heads"), d = c.i("head_dim");
  State st;
  st.split = c.i("split");
  st.causal = c.b("causal");
  st.q = input({b, s, h, d}, c.dtype, "merge.q", ctx.seed, 2.0);
  st.k = input({b, s, h, d}, c.dtype, "merge.k", ctx.seed, 1.5);
  st.v = input({b, s, h, d}, c.dtype, "merge.v", ctx.seed);
  st.qd = on_device(st.q, ctx.device);
  st.k1 = on_device(narrow(st.k, 1, 0, st.split), ctx.device),
  st.v1 = on_device(narrow(st.v, 1, 0, st.split), ctx.device);
  st.k2 = on_device(narrow(st.k, 1, st.split, s - st.split), ctx.device);
  st.v2 = on_device(narrow(st.v, 1, st.split, s - st.split), ctx.device);
  if (st.causal) {
    st.mask1 = ops::AttentionMask::causal_blocks(0, s, 0, st.split);
    st.mask2 = ops::AttentionMask::causal_blocks(0, s, st.split, s - st.split);
  }
  return st;
}

void run(State& s) {
  ops::AttentionOut a = ops::attention_block_forward(s.qd, s.k1, s.v1, s.mask1, DType::f32);
  const ops::AttentionOut b = ops::attention_block_forward(s.qd, s.k2, s.v2, s.mask2, DType::f32);
  ops::attention_merge(a.out, a.lse, b.out, b.lse);
  s.out = a.out, s.lse = a.lse;
}

void check(State& s, Checker& checker) {
  run(s);
  for (auto [name, t] : {std::pair{"q", &s.q}, {"k", &s.k}, {"v", &s.v}}) checker.input(name, *t);
  const ref::AttentionResult f = ref::attention_forward(s.q, s.k, s.v, s.causal);
  const Tensor out = on_host(s.out).to(s.q.dtype()), lse = on_host(s.lse);
  checker.compare("out", OpClass::attention, out, out, f.out);
  checker.compare("lse", OpClass::row_stat, lse, lse, f.lse);
}

CaseDef attention_merge_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "attention_merge",
      .summary = "LSE merge of two key blocks' partial results against the whole-sequence attention",
      .kernel_faults = {KernelFault::attention_merge_lse},
      .table_metrics = {"GBps"},
      .configs =
          [](const SweepRequest& req) {
            return op_configs(req, shapes(req.profile), {DType::f32, DType::bf16});
          },
      .memory =
          [](const CaseConfig& c) {
            return op_memory(c, 8.0 * c.i("batch") * c.i("seq") * c.i("heads") * c.i("head_dim"));
          },
      .setup = setup,
      .timed = {{"merge", [](State& s) { run(s); }}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            return rates(0, 4.0 * 4 * s.q.numel(), times.at("merge"));  // two blocks' f32 out read, merged written
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 80, attention_merge_case);

}  // namespace
}  // namespace sextant::ops_suite
