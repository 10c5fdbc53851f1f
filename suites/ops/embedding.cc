// The embedding lookup and its gradient (kernels/tensor_parallel/vocab.h) on
// a tensor-parallel group of one, against reference/embedding.h. The token
// ids repeat (a small vocabulary), so gradient rows must add up.
#include "reference/embedding.h"
#include "harness/rng.h"
#include "kernels/tensor_parallel/vocab.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

struct State {
  Communicator* self = nullptr;
  int64_t batch = 0, seq = 0, vocab = 0, hidden = 0;
  std::vector<int64_t> ids;  // [batch * seq]
  Tensor table, dy;          // host: [vocab, hidden], [batch, seq, hidden]
  tp::VocabParallelEmbedding emb;
  Tensor dyd, y, dtable;
};

std::vector<nlohmann::json> shapes(Profile profile) {
  std::vector<nlohmann::json> out = {{{"batch", 1}, {"seq", 1}, {"vocab", 1}, {"hidden", 3}},
                                     {{"batch", 2}, {"seq", 37}, {"vocab", 11}, {"hidden", 20}},
                                     {{"batch", 4}, {"seq", 64}, {"vocab", 1000}, {"hidden", 64}}};
  if (profile == Profile::qualify) out.push_back({{"batch", 8}, {"seq", 2048}, {"vocab", 32768}, {"hidden", 1024}});
  return out;
}

State setup(CaseContext& ctx) {
  const CaseConfig& c = ctx.config;
  State s;
  s.self = &ctx.self;
  s.batch = c.i("batch"), s.seq = c.i("seq"), s.vocab = c.i("vocab"), s.hidden = c.i("hidden");
  for (int64_t t = 0; t < s.batch * s.seq; ++t)
    s.ids.push_back(static_cast<int64_t>(random_bits(ctx.seed, tensor_id("ops.embedding.ids"), t) % s.vocab));
  s.table = input({s.vocab, s.hidden}, c.dtype, "embedding.table", ctx.seed);
  s.dy = input({s.batch, s.seq, s.hidden}, c.dtype, "embedding.dy", ctx.seed);
  s.emb = {on_device(s.table, ctx.device), 0};
  s.dyd = on_device(s.dy, ctx.device);
  return s;
}

void run(State& s) {
  const tp::TpGroup group{*s.self};
  tp::EmbeddingSaved saved;
  s.y = tp::embedding_forward(group, s.emb, s.ids, s.batch, s.seq, saved);
  tp::embedding_backward(group, s.emb, saved, s.dyd, s.dtable);
}

void check(State& s, Checker& checker) {
  run(s);
  std::vector<double> ids(s.ids.begin(), s.ids.end());
  checker.input("ids", Tensor::from_values({static_cast<int64_t>(ids.size())}, ids, DType::f64));
  checker.input("table", s.table);
  checker.input("dy", s.dy);
  const Tensor y = on_host(s.y).reshape({s.batch * s.seq, s.hidden}), dtable = on_host(s.dtable);
  checker.compare("y", OpClass::data_movement, y, y, ref::embedding_forward(s.ids, s.table));
  checker.compare("dtable", OpClass::linear, dtable, dtable,  // sums of rows
                  ref::embedding_backward(s.ids, s.dy.reshape({s.batch * s.seq, s.hidden}), s.vocab));
}

CaseDef embedding_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "embedding",
      .summary = "embedding lookup and its gradient (repeated tokens add their rows)",
      .kernel_faults = {KernelFault::embedding_backward_duplicates},
      .table_metrics = {"GBps"},
      .configs =
          [](const SweepRequest& req) {
            return op_configs(req, shapes(req.profile), {DType::f32, DType::bf16});
          },
      .memory =
          [](const CaseConfig& c) {
            return op_memory(c, 2.0 * c.i("vocab") * c.i("hidden") + 2.0 * c.i("batch") * c.i("seq") * c.i("hidden"));
          },
      .setup = setup,
      .timed = {{"fwd_bwd", run}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            const double rows = static_cast<double>(s.batch * s.seq) * s.hidden * dtype_size(s.table.dtype());
            return rates(0, 4.0 * rows, times.at("fwd_bwd"));
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 100, embedding_case);

}  // namespace
}  // namespace sextant::ops_suite
