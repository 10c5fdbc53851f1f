// GELU (tanh form) forward and backward against reference/gelu.h.
#include "kernels/ops/gelu.h"
#include "reference/gelu.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

struct State {
  Tensor x, dy;           // host inputs, rounded to the dtype: [n]
  Tensor xd, dyd, y, dx;  // on the device the case runs on
};

// A single element, a prime below one lane vector, sizes off the 8 / 16
// lane widths, and one large enough to stream.
std::vector<nlohmann::json> shapes(Profile profile) {
  std::vector<nlohmann::json> out;
  std::vector<int64_t> sizes = {1, 7, 1003, 65539};
  if (profile == Profile::qualify) sizes.push_back(int64_t{1} << 24);
  for (int64_t n : sizes) out.push_back({{"n", n}});
  return out;
}

State setup(CaseContext& ctx) {
  const int64_t n = ctx.config.i("n");
  const DType dtype = ctx.config.dtype;
  State s;
  s.x = input({n}, dtype, "gelu.x", ctx.seed, 3.0);  // wide enough for the tanh tails
  s.dy = input({n}, dtype, "gelu.dy", ctx.seed);
  s.xd = on_device(s.x, ctx.device), s.dyd = on_device(s.dy, ctx.device);
  s.y = Tensor::empty({n}, dtype, ctx.device), s.dx = Tensor::empty({n}, dtype, ctx.device);
  return s;
}

void run(State& s) {
  ops::gelu_forward(s.xd, s.y);
  ops::gelu_backward(s.dyd, s.xd, s.dx);
}

void check(State& s, Checker& checker) {
  run(s);
  checker.input("x", s.x);
  checker.input("dy", s.dy);
  const Tensor y = on_host(s.y), dx = on_host(s.dx);
  checker.compare("y", OpClass::elementwise, y, y, ref::gelu_forward(s.x));
  checker.compare("dx", OpClass::elementwise, dx, dx, ref::gelu_backward(s.dy, s.x));
}

CaseDef gelu_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "gelu",
      .summary = "GELU forward and backward, element-wise",
      .kernel_faults = {KernelFault::gelu_backward_coefficient},
      .table_metrics = {"GBps"},
      .configs =
          [](const SweepRequest& req) {
            return op_configs(req, shapes(req.profile), {DType::f32, DType::bf16, DType::f16});
          },
      .memory = [](const CaseConfig& c) { return op_memory(c, 5.0 * c.i("n")); },
      .setup = setup,
      .timed = {{"fwd_bwd", run}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            return rates(0, 5.0 * s.x.numel() * dtype_size(s.x.dtype()), times.at("fwd_bwd"));
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 30, gelu_case);

}  // namespace
}  // namespace sextant::ops_suite
