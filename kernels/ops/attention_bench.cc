// Host attention block against sgemm in the same run (goal: the forward at
// blocks >= 512 and d in {64, 128} at half of sgemm's GFLOP/s or more).
//   OPENBLAS_NUM_THREADS=1 ./ops_bench --benchmark_filter='Sgemm|Attention'
// FLOPs: forward 4 s_q s_k d per head (halved when causal), backward 2.5x.
// `of_sgemm` is the attention rate over BM_Sgemm's 1024^3 rate measured once
// in this process.
#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <vector>

#include "harness/rng.h"
#include "harness/timing.h"
#include "kernels/ops/attention_block.h"
#include "kernels/ops/gemm.h"

namespace sextant::ops {
namespace {

double sgemm_seconds(int64_t n, const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c) {
  const double start = process_cpu_seconds();
  gemm_f32(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  return process_cpu_seconds() - start;
}

// Best of five 1024^3 sgemms, in FLOP/s: the yardstick of this run.
double sgemm_rate() {
  static const double rate = [] {
    const int64_t n = 1024;
    std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
    double best = 1e30;
    for (int i = 0; i < 5; ++i) best = std::min(best, sgemm_seconds(n, a, b, c));
    return 2.0 * n * n * n / best;
  }();
  return rate;
}

void BM_Sgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  for (auto _ : state) {
    gemm_f32(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOPs"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Sgemm)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);

struct Problem {
  Tensor q, k, v, dout;
  AttentionMask mask;
  double flops_fwd;
};

// One head pair per batch row: b = 1, hq = hk = 2, s_q = s_k = block.
Problem problem(int64_t block, int64_t d, bool causal) {
  const int64_t heads = 2;
  Problem p{random_tensor({1, block, heads, d}, DType::f32, {1, tensor_id("q")}),
            random_tensor({1, block, heads, d}, DType::f32, {1, tensor_id("k")}),
            random_tensor({1, block, heads, d}, DType::f32, {1, tensor_id("v")}),
            random_tensor({1, block, heads, d}, DType::f32, {1, tensor_id("dout")}),
            causal ? AttentionMask::causal_blocks(0, block, 0, block) : AttentionMask::none(),
            4.0 * heads * block * block * d * (causal ? 0.5 : 1.0)};
  return p;
}

void report(benchmark::State& state, double flops) {
  state.counters["FLOPs"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  // (flops / time) / sgemm rate: the fraction of sgemm's speed.
  state.counters["of_sgemm"] = benchmark::Counter(flops / sgemm_rate(), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_AttentionForward(benchmark::State& state) {
  Problem p = problem(state.range(0), state.range(1), state.range(2) != 0);
  sgemm_rate();  // measure the yardstick before timing
  for (auto _ : state) {
    AttentionOut o = attention_block_forward(p.q, p.k, p.v, p.mask);
    benchmark::DoNotOptimize(o.out.raw());
  }
  report(state, p.flops_fwd);
}

void BM_AttentionBackward(benchmark::State& state) {
  Problem p = problem(state.range(0), state.range(1), state.range(2) != 0);
  AttentionOut f = attention_block_forward(p.q, p.k, p.v, p.mask);
  sgemm_rate();
  for (auto _ : state) {
    AttentionGrads g = attention_block_backward(p.q, p.k, p.v, f.out, f.lse, p.dout, p.mask);
    benchmark::DoNotOptimize(g.dq.raw());
  }
  report(state, 2.5 * p.flops_fwd);
}

// Args: block (s_q = s_k), head dim, causal.
BENCHMARK(BM_AttentionForward)
    ->ArgsProduct({{512, 1024, 2048}, {64, 128}, {0, 1}})
    ->ArgNames({"block", "d", "causal"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionBackward)
    ->ArgsProduct({{512, 1024}, {64, 128}, {0}})
    ->ArgNames({"block", "d", "causal"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sextant::ops
