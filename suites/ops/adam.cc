// Adam (kernels/ops/adam.h): three steps on f32 master weights with
// gradients in the test dtype, against reference/adam.h.
#include "kernels/ops/adam.h"
#include "reference/adam.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

constexpr int kSteps = 3;

struct State {
  std::vector<Tensor> grads;  // host, one per step: [n] in the test dtype
  Tensor param0;              // host f32: [n]
  std::vector<Tensor> grads_d;
  Tensor param, m, v;  // on the device, f32
  ops::AdamConfig config{1e-2, 0.9, 0.999, 1e-8, 0.01};
};

std::vector<nlohmann::json> shapes(Profile profile) {
  std::vector<nlohmann::json> out = {{{"n", 1}}, {{"n", 13}}, {{"n", 4099}}};
  if (profile == Profile::qualify) out.push_back({{"n", int64_t{1} << 24}});
  return out;
}

State setup(CaseContext& ctx) {
  const int64_t n = ctx.config.i("n");
  State s;
  s.param0 = input({n}, DType::f32, "adam.param", ctx.seed);
  for (int step = 0; step < kSteps; ++step) {
    s.grads.push_back(input({n}, ctx.config.dtype, "adam.grad" + std::to_string(step), ctx.seed));
    s.grads_d.push_back(on_device(s.grads.back(), ctx.device));
  }
  s.param = s.param0.to(ctx.device);
  s.m = Tensor::zeros({n}, DType::f32, ctx.device), s.v = Tensor::zeros({n}, DType::f32, ctx.device);
  return s;
}

void run_steps(State& s) {
  for (int step = 0; step < kSteps; ++step) ops::adam_step(s.param, s.grads_d[step], s.m, s.v, step + 1, s.config);
}

void check(State& s, Checker& checker) {
  s.param = s.param0.to(s.param.device());
  s.m.zero();
  s.v.zero();
  run_steps(s);
  checker.input("param0", s.param0);
  for (int step = 0; step < kSteps; ++step) checker.input("grad" + std::to_string(step), s.grads[step]);
  Tensor p = s.param0.to(DType::f64), m = Tensor::zeros(p.shape(), DType::f64),
         v = Tensor::zeros(p.shape(), DType::f64);
  const ref::AdamConfig rc{s.config.lr, s.config.beta1, s.config.beta2, s.config.eps, s.config.weight_decay};
  for (int step = 0; step < kSteps; ++step) ref::adam_step(p, s.grads[step], m, v, step + 1, rc);
  const Tensor param = on_host(s.param), exp_avg = on_host(s.m), exp_avg_sq = on_host(s.v);
  checker.compare("param", OpClass::optimizer, param, param, p);
  checker.compare("exp_avg", OpClass::optimizer, exp_avg, exp_avg, m);
  checker.compare("exp_avg_sq", OpClass::optimizer, exp_avg_sq, exp_avg_sq, v);
}

CaseDef adam_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "adam",
      .summary = "AdamW, three steps: f32 master weights and moments, gradients in the test dtype",
      .kernel_faults = {KernelFault::adam_bias_correction},
      .table_metrics = {"GBps"},
      .configs =
          [](const SweepRequest& req) {
            return op_configs(req, shapes(req.profile), {DType::f32, DType::bf16});
          },
      .memory = [](const CaseConfig& c) { return op_memory(c, (4.0 + kSteps) * c.i("n")); },
      .setup = setup,
      .timed = {{"step", [](State& s) { ops::adam_step(s.param, s.grads_d[0], s.m, s.v, 1, s.config); }}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            // reads param, m, v, grad; writes param, m, v
            return rates(0, 4.0 * 6 * s.param0.numel() + dtype_size(s.grads[0].dtype()) * s.param0.numel(),
                         times.at("step"));
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 90, adam_case);

}  // namespace
}  // namespace sextant::ops_suite
