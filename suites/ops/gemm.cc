// The gemm wrapper (OpenBLAS on the host, cuBLAS on the device):
// C = alpha op(A) op(B) + beta C for every transpose combination, beta 0
// (overwrite) and 1 (accumulate, as weight gradients do), against a plain
// float64 triple loop.
#include "kernels/ops/gemm.h"

#include <array>

#include "suites/ops/ops.h"

namespace sextant::ops_suite {
namespace {

struct State {
  bool ta = false, tb = false;
  float beta = 0;
  Tensor a, b, c0;   // host inputs: A [m, k] or [k, m], B [k, n] or [n, k], C0 [m, n]
  Tensor ad, bd, c;  // on the device; c starts as C0
  int64_t m = 0, n = 0, k = 0;
};

// Shapes off every tile and vector width, a one-element product, an outer
// product (k = 1), and a square one large enough to measure. The
// one-element product overwrites only: a b + c of single random numbers
// may cancel, and then its relative error measures that cancellation, not
// the kernel (the accumulate path runs at every other shape).
std::vector<nlohmann::json> shapes(Profile profile) {
  std::vector<nlohmann::json> out;
  std::vector<std::array<int64_t, 3>> mnk = {{1, 1, 1}, {7, 13, 5}, {33, 65, 1}, {96, 40, 129}};
  if (profile != Profile::ci) mnk.push_back({256, 256, 256});
  if (profile == Profile::qualify) mnk.push_back({2048, 2048, 2048});
  for (const auto& [m, n, k] : mnk)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (double beta : {0.0, 1.0})
          if (beta == 0.0 || m * n * k > 1)
            out.push_back({{"m", m}, {"n", n}, {"k", k}, {"trans_a", ta}, {"trans_b", tb}, {"beta", beta}});
  return out;
}

State setup(CaseContext& ctx) {
  const CaseConfig& c = ctx.config;
  State s;
  s.m = c.i("m"), s.n = c.i("n"), s.k = c.i("k");
  s.ta = c.b("trans_a"), s.tb = c.b("trans_b");
  s.beta = static_cast<float>(c.f("beta"));
  s.a = input(s.ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, c.dtype, "gemm.a", ctx.seed);
  s.b = input(s.tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, c.dtype, "gemm.b", ctx.seed);
  s.c0 = input({s.m, s.n}, c.dtype, "gemm.c", ctx.seed);
  s.ad = on_device(s.a, ctx.device), s.bd = on_device(s.b, ctx.device);
  s.c = s.c0.to(ctx.device);  // a copy: the timed runs overwrite or accumulate into it
  return s;
}

void run(State& s) { ops::gemm(s.ad, s.ta, s.bd, s.tb, s.c, 1.0f, s.beta); }

// C = op(A) op(B) + beta C0, in float64.
Tensor reference(const State& s) {
  const Tensor a = s.a.to(DType::f64), b = s.b.to(DType::f64), c0 = s.c0.to(DType::f64);
  const double *pa = a.data<double>(), *pb = b.data<double>(), *pc = c0.data<double>();
  Tensor out = Tensor::empty({s.m, s.n}, DType::f64);
  double* o = out.data<double>();
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < s.k; ++p)
        sum += pa[s.ta ? p * s.m + i : i * s.k + p] * pb[s.tb ? j * s.k + p : p * s.n + j];
      o[i * s.n + j] = sum + s.beta * pc[i * s.n + j];
    }
  return out;
}

void check(State& s, Checker& checker) {
  s.c = s.c0.to(s.ad.device());
  run(s);
  checker.input("a", s.a);
  checker.input("b", s.b);
  checker.input("c0", s.c0);
  const Tensor c = on_host(s.c);
  checker.compare("c", OpClass::linear, c, c, reference(s));
}

CaseDef gemm_case() {
  return make_case(CaseTable<State>{
      .suite = "ops",
      .name = "gemm",
      .summary = "gemm wrapper: every transpose, overwrite (beta 0) and accumulate (beta 1)",
      .kernel_faults = {KernelFault::gemm_ignores_beta},
      .table_metrics = {"gflops"},
      .configs =
          [](const SweepRequest& req) {
            return op_configs(req, shapes(req.profile), {DType::f32, DType::bf16, DType::f16});
          },
      .memory =
          [](const CaseConfig& c) {
            return op_memory(c, 1.0 * c.i("m") * c.i("k") + 1.0 * c.i("k") * c.i("n") + 2.0 * c.i("m") * c.i("n"));
          },
      .setup = setup,
      .timed = {{"gemm", run}},
      .check = check,
      .metrics =
          [](State& s, const RegionTimes& times) {
            const double es = static_cast<double>(dtype_size(s.a.dtype()));
            return rates(2.0 * s.m * s.n * s.k, es * (s.m * s.k + s.k * s.n + 2.0 * s.m * s.n), times.at("gemm"));
          },
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 10, gemm_case);

}  // namespace
}  // namespace sextant::ops_suite
