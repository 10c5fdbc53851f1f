// Row softmax forward and backward against reference/softmax.h.
#include "kernels/ops/softmax.h"
#include "reference/softmax.h"
#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

struct State {
  Tensor x, dy;           // host inputs: [rows, n]
  Tensor xd, dyd, y, dx;  // on the device
};

// One row of one column, rows narrower and wider than a lane vector, a width
// off every power of two, a vocabulary-sized row.
std::vector<nlohmann::json> shapes(Profile profile) {
  std::vector<nlohmann::json> out = {
      {{"rows", 1}, {"n", 1}}, {{"rows", 3}, {"n", 5}}, {{"rows", 17}, {"n", 129}}, {{"rows", 4}, {"n", 5003}}};
  if (profile == Profile::qualify) out.push_back({{"rows", 4096}, {"n", 4096}});
  return out;
}

State setup(CaseContext& ctx) {
  const Shape shape{ctx.config.i("rows"), ctx.config.i("n")};
  const DType dtype = ctx.config.dtype;
  State s;
  s.x = input(shape, dtype, "softmax.x", ctx.seed, 4.0);
  s.dy = input(shape, dtype, "softmax.dy", ctx.seed);
  s.xd = on_device(s.x, ctx.device), s.dyd = on_device(s.dy, ctx.device);
  s.y = Tensor::empty(shape, dtype, ctx.device), s.dx = Tensor::empty(shape, dtype, ctx.device);
  return s;
}

void run(State& s) {
  ops::softmax_forward(s.xd, s.y);
  ops::softmax_backward(s.dyd, s.y, s.dx);
}

void check(State& s, Checker& checker) {
  run(s);
  checker.input("x", s.x);
  checker.input("dy", s.dy);
  const Tensor y = on_host(s.y), dx = on_host(s.dx), ref_y = ref::softmax_forward(s.x);
  checker.compare("y", OpClass::softmax, y, y, ref_y);
  // The backward reads the kernel's own y, as a training step does.
  checker.compare("dx", OpClass::softmax, dx, dx, ref::softmax_backward(s.dy, y));
}

CaseDef softmax_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "softmax",
      .summary = "row softmax forward and backward",
      .kernel_faults = {KernelFault::softmax_backward},
      .table_metrics = {"GBps"},
      .configs =
          [](const SweepRequest& req) {
            return op_configs(req, shapes(req.profile), {DType::f32, DType::bf16, DType::f16});
          },
      .memory = [](const CaseConfig& c) { return op_memory(c, 5.0 * c.i("rows") * c.i("n")); },
      .setup = setup,
      .timed = {{"fwd_bwd", run}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            return rates(0, 5.0 * s.x.numel() * dtype_size(s.x.dtype()), times.at("fwd_bwd"));
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 40, softmax_case);

}  // namespace
}  // namespace sextant::ops_suite
