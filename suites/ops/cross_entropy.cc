// Cross-entropy over the whole vocabulary: loss per row and the mean, and
// the logits' gradient, against reference/cross_entropy.h.
#include "kernels/ops/cross_entropy.h"
#include "harness/rng.h"
#include "reference/cross_entropy.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

struct State {
  Tensor logits;                 // host input: [rows, vocab]
  std::vector<int64_t> targets;  // [rows]
  Tensor logits_d, dlogits;      // on the device
  ops::CrossEntropyForward fwd;
};

// ignore_every N: every Nth row is a padding position (target
// ops::kIgnoreTarget), as the step's padded packed rows give it.
std::vector<nlohmann::json> shapes(Profile profile) {
  std::vector<nlohmann::json> out = {{{"rows", 1}, {"vocab", 2}},
                                     {{"rows", 6}, {"vocab", 83}},
                                     {{"rows", 33}, {"vocab", 1001}},
                                     {{"rows", 20}, {"vocab", 83}, {"ignore_every", 3}}};
  if (profile == Profile::qualify) out.push_back({{"rows", 2048}, {"vocab", 32768}});
  return out;
}

State setup(CaseContext& ctx) {
  const int64_t rows = ctx.config.i("rows"), vocab = ctx.config.i("vocab");
  State s;
  s.logits = input({rows, vocab}, ctx.config.dtype, "ce.logits", ctx.seed, 4.0);
  const int64_t ignore_every = ctx.config.params.value("ignore_every", int64_t{0});
  for (int64_t r = 0; r < rows; ++r)
    s.targets.push_back(ignore_every > 0 && r % ignore_every == ignore_every - 1
                            ? ops::kIgnoreTarget
                            : static_cast<int64_t>(random_bits(ctx.seed, tensor_id("ops.ce.targets"), r) % vocab));
  s.logits_d = on_device(s.logits, ctx.device);
  s.dlogits = Tensor::empty({rows, vocab}, ctx.config.dtype, ctx.device);
  return s;
}

void run(State& s) {
  s.fwd = ops::cross_entropy_forward(s.logits_d, s.targets, ops::LossReduction::mean);
  ops::cross_entropy_backward(s.logits_d, s.targets, s.fwd.stats, ops::LossReduction::mean, 1.0f, s.dlogits);
}

void check(State& s, Checker& checker) {
  run(s);
  checker.input("logits", s.logits);
  std::vector<double> targets(s.targets.begin(), s.targets.end());
  checker.input("targets", Tensor::from_values({static_cast<int64_t>(targets.size())}, targets, DType::f64));
  const Tensor loss = Tensor::from_values({1}, {s.fwd.loss}, DType::f64);
  const Tensor row_loss = on_host(ops::cross_entropy_row_loss(s.fwd.stats, s.targets)), dlogits = on_host(s.dlogits);
  checker.compare(
      "loss", OpClass::loss, loss, loss,
      Tensor::from_values({1}, {ref::cross_entropy_forward(s.logits, s.targets, ref::Reduction::mean)}, DType::f64));
  checker.compare("row_loss", OpClass::loss, row_loss, row_loss, ref::cross_entropy_row_loss(s.logits, s.targets));
  checker.compare("dlogits", OpClass::softmax, dlogits, dlogits,
                  ref::cross_entropy_backward(s.logits, s.targets, ref::Reduction::mean));
}

CaseDef cross_entropy_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "cross_entropy",
      .summary = "cross-entropy loss (per row and mean) and its gradient over the vocabulary",
      .kernel_faults = {KernelFault::cross_entropy_gradient, KernelFault::cross_entropy_counts_ignored},
      .table_metrics = {"GBps"},
      .configs =
          [](const SweepRequest& req) {
            return op_configs(req, shapes(req.profile), {DType::f32, DType::bf16, DType::f16});
          },
      .memory = [](const CaseConfig& c) { return op_memory(c, 3.0 * c.i("rows") * c.i("vocab")); },
      .setup = setup,
      .timed = {{"fwd_bwd", run}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            // forward reads the logits twice (max, sum), backward once and writes them.
            return rates(0, 4.0 * s.logits.numel() * dtype_size(s.logits.dtype()), times.at("fwd_bwd"));
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 60, cross_entropy_case);

}  // namespace
}  // namespace sextant::ops_suite
