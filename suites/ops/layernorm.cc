// LayerNorm forward and backward against reference/layernorm.h.
#include "kernels/ops/layernorm.h"
#include "reference/layernorm.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

struct State {
  Tensor x, gamma, beta, dy;  // host inputs: [rows, h], [h], [h], [rows, h]
  Tensor xd, gd, bd, dyd;     // on the device
  Tensor y, dx, dgamma, dbeta;
  ops::LayerNormStats stats;
};

// One row of three (with two elements xhat is +-1 whatever x is, so dx is
// zero up to eps and its relative error meaningless), widths off the lane
// vectors, a transformer-sized row.
std::vector<nlohmann::json> shapes(Profile profile) {
  std::vector<nlohmann::json> out = {
      {{"rows", 1}, {"h", 3}}, {{"rows", 5}, {"h", 17}}, {{"rows", 33}, {"h", 64}}, {{"rows", 7}, {"h", 1000}}};
  if (profile == Profile::qualify) out.push_back({{"rows", 8192}, {"h", 4096}});
  return out;
}

State setup(CaseContext& ctx) {
  const int64_t rows = ctx.config.i("rows"), h = ctx.config.i("h");
  const DType dtype = ctx.config.dtype;
  State s;
  s.x = input({rows, h}, dtype, "layernorm.x", ctx.seed, 2.0);
  s.gamma = input({h}, dtype, "layernorm.gamma", ctx.seed);
  s.beta = input({h}, dtype, "layernorm.beta", ctx.seed);
  s.dy = input({rows, h}, dtype, "layernorm.dy", ctx.seed);
  const Device d = ctx.device;
  s.xd = on_device(s.x, d), s.gd = on_device(s.gamma, d), s.bd = on_device(s.beta, d), s.dyd = on_device(s.dy, d);
  s.y = Tensor::empty({rows, h}, dtype, d), s.dx = Tensor::empty({rows, h}, dtype, d);
  s.dgamma = Tensor::empty({h}, dtype, d), s.dbeta = Tensor::empty({h}, dtype, d);
  return s;
}

void run(State& s) {
  s.stats = ops::layernorm_forward(s.xd, s.gd, s.bd, s.y);
  ops::layernorm_backward(s.dyd, s.xd, s.gd, s.stats, s.dx, s.dgamma, s.dbeta);
}

void check(State& s, Checker& checker) {
  run(s);
  checker.input("x", s.x);
  checker.input("gamma", s.gamma);
  checker.input("beta", s.beta);
  checker.input("dy", s.dy);
  const ref::LayerNormOut f = ref::layernorm_forward(s.x, s.gamma, s.beta);
  const ref::LayerNormGrads g = ref::layernorm_backward(s.dy, s.x, s.gamma);
  const Tensor y = on_host(s.y), mean = on_host(s.stats.mean), rstd = on_host(s.stats.rstd);
  const Tensor dx = on_host(s.dx), dgamma = on_host(s.dgamma), dbeta = on_host(s.dbeta);
  checker.compare("y", OpClass::norm, y, y, f.y);
  checker.compare("mean", OpClass::row_stat, mean, mean, f.mean);
  checker.compare("rstd", OpClass::row_stat, rstd, rstd, f.rstd);
  checker.compare("dx", OpClass::norm, dx, dx, g.dx);
  checker.compare("dgamma", OpClass::norm, dgamma, dgamma, g.dgamma);
  checker.compare("dbeta", OpClass::norm, dbeta, dbeta, g.dbeta);
}

CaseDef layernorm_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "layernorm",
      .summary = "LayerNorm forward (y, mean, rstd) and backward (dx, dgamma, dbeta)",
      .kernel_faults = {KernelFault::layernorm_forward_variance, KernelFault::layernorm_backward_mean_term},
      .table_metrics = {"GBps"},
      .configs =
          [](const SweepRequest& req) {
            return op_configs(req, shapes(req.profile), {DType::f32, DType::bf16, DType::f16});
          },
      .memory = [](const CaseConfig& c) { return op_memory(c, 6.0 * c.i("rows") * c.i("h")); },
      .setup = setup,
      .timed = {{"fwd_bwd", run}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            // forward reads x, writes y; backward reads dy and x, writes dx.
            return rates(0, 5.0 * s.x.numel() * dtype_size(s.x.dtype()), times.at("fwd_bwd"));
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 50, layernorm_case);

}  // namespace
}  // namespace sextant::ops_suite
