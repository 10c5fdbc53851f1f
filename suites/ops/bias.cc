// Bias add and its gradient (column sums) against plain float64 sums.
#include "kernels/ops/bias.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

struct State {
  Tensor x, bias, dy;            // host inputs: [rows, n], [n], [rows, n]
  Tensor xd, biasd, dyd, y, db;  // on the device
};

std::vector<nlohmann::json> shapes(Profile profile) {
  std::vector<nlohmann::json> out = {
      {{"rows", 1}, {"n", 1}}, {{"rows", 7}, {"n", 13}}, {{"rows", 129}, {"n", 67}}, {{"rows", 33}, {"n", 1000}}};
  if (profile == Profile::qualify) out.push_back({{"rows", 8192}, {"n", 4096}});
  return out;
}

State setup(CaseContext& ctx) {
  const int64_t rows = ctx.config.i("rows"), n = ctx.config.i("n");
  const DType dtype = ctx.config.dtype;
  State s;
  s.x = input({rows, n}, dtype, "bias.x", ctx.seed);
  s.bias = input({n}, dtype, "bias.b", ctx.seed);
  s.dy = input({rows, n}, dtype, "bias.dy", ctx.seed);
  s.xd = on_device(s.x, ctx.device), s.biasd = on_device(s.bias, ctx.device), s.dyd = on_device(s.dy, ctx.device);
  s.y = Tensor::empty({rows, n}, dtype, ctx.device), s.db = Tensor::empty({n}, dtype, ctx.device);
  return s;
}

void run(State& s) {
  ops::bias_add(s.xd, s.biasd, s.y);
  ops::bias_backward(s.dyd, s.db);
}

void check(State& s, Checker& checker) {
  run(s);
  checker.input("x", s.x);
  checker.input("bias", s.bias);
  checker.input("dy", s.dy);
  const int64_t rows = s.x.dim(0), n = s.x.dim(1);
  // y = x + b row by row; db = the column sums of dy.
  Tensor ref_y = Tensor::empty({rows, n}, DType::f64), ref_db = Tensor::zeros({n}, DType::f64);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      ref_y.set(r * n + j, s.x.at(r * n + j) + s.bias.at(j));
      ref_db.set(j, ref_db.at(j) + s.dy.at(r * n + j));
    }
  const Tensor y = on_host(s.y), db = on_host(s.db);
  checker.compare("y", OpClass::elementwise, y, y, ref_y);
  checker.compare("db", OpClass::linear, db, db, ref_db);  // a sum over the rows
}

CaseDef bias_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "bias",
      .summary = "bias add over the last dimension and its gradient (column sums)",
      .table_metrics = {"GBps"},
      .configs =
          [](const SweepRequest& req) {
            return op_configs(req, shapes(req.profile), {DType::f32, DType::bf16, DType::f16});
          },
      .memory = [](const CaseConfig& c) { return op_memory(c, 4.0 * c.i("rows") * c.i("n")); },
      .setup = setup,
      .timed = {{"fwd_bwd", run}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            return rates(0, 3.0 * s.x.numel() * dtype_size(s.x.dtype()), times.at("fwd_bwd"));
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 20, bias_case);

}  // namespace
}  // namespace sextant::ops_suite
