// Micro-benchmarks of the host ops, each beside what bounds it:
// - gemm through our wrapper (ops::gemm on f32 tensors) against cblas_sgemm
//   called directly, square shapes 512..4096: goal wrapper >= 95% of direct;
// - LayerNorm and GELU forward against a memcpy of the same bytes: goal >= 50%
//   of the copy bandwidth;
// - the other ops with their bandwidth, for the record.
//   OPENBLAS_NUM_THREADS=2 ./ops_bench --benchmark_filter='VsSgemm|VsCopy'
//
// "Vs" benchmarks time both sides in every iteration, alternating which runs
// first, so that load from other processes on a shared machine hits both
// alike; their counters are rates from each side's fastest iteration (other
// work on the machine only ever adds time) and the ratio of the two. gemm
// (multi-threaded BLAS) is timed by the wall clock and by the process's CPU
// clock (BM_GemmVsSgemm/wall, /cpu); the single-threaded loops
// and their memcpy by the thread's CPU clock, which leaves out time the thread
// spent descheduled. GB/s counts bytes read plus bytes written (1 GB = 1e9 B).
// SEXTANT_SIMD_LANES=8 or 4 runs the AVX2 or baseline code paths (simd.h).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "harness/rng.h"
#include "harness/timing.h"
#include "kernels/ops/adam.h"
#include "kernels/ops/bias.h"
#include "kernels/ops/cross_entropy.h"
#include "kernels/ops/gelu.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/layernorm.h"
#include "kernels/ops/softmax.h"

namespace sextant::ops {
namespace {

enum class Clock { wall, thread_cpu, process_cpu };

double now(Clock clock) {
  switch (clock) {
    case Clock::thread_cpu: return thread_cpu_seconds();
    case Clock::process_cpu: return process_cpu_seconds();
    default: return now_seconds();
  }
}

double seconds_of(Clock clock, const std::function<void()>& work) {
  const double start = now(clock);
  work();
  return now(clock) - start;
}

// Times `ours` and `baseline` once per iteration (order alternating) and sets
// <ours_name>, <base_name> (1e9 units per second of `units_per_call`, from
// each side's fastest iteration) and <ratio_name> = ours rate / baseline rate.
void run_pair(benchmark::State& state, Clock clock, const std::function<void()>& ours,
              const std::function<void()>& baseline, double units_per_call, const char* ours_name,
              const char* base_name, const char* ratio_name) {
  ours();  // warm caches, page tables and BLAS buffers
  baseline();
  double best_ours = 1e300, best_base = 1e300;
  int64_t i = 0;
  for (auto _ : state) {
    double a, b;
    if (i++ % 2 == 0) {
      a = seconds_of(clock, ours);
      b = seconds_of(clock, baseline);
    } else {
      b = seconds_of(clock, baseline);
      a = seconds_of(clock, ours);
    }
    best_ours = std::min(best_ours, a);
    best_base = std::min(best_base, b);
    state.SetIterationTime(a + b);
  }
  state.counters[ours_name] = units_per_call / best_ours * 1e-9;
  state.counters[base_name] = units_per_call / best_base * 1e-9;
  state.counters[ratio_name] = best_base / best_ours;
}

Tensor input(const Shape& shape, const char* name, DType dtype = DType::f32) {
  return random_tensor(shape, dtype, {1, tensor_id(name)});
}

// --- gemm: wrapper vs direct sgemm ------------------------------------------

// clock: wall (throughput of all BLAS threads together), or process_cpu
// (GFLOP per CPU-second summed over the BLAS threads: the wrapper-vs-direct
// ratio without the noise of threads descheduled by other work).
void BM_GemmVsSgemm(benchmark::State& state, Clock clock) {
  const int64_t n = state.range(0);
  Tensor a = input({n, n}, "bench.a"), b = input({n, n}, "bench.b"), c = Tensor::zeros({n, n}, DType::f32);
  Tensor c_direct = Tensor::zeros({n, n}, DType::f32);  // same (64-byte aligned) allocation as c
  auto ours = [&] { gemm(a, false, b, false, c); };
  auto direct = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(n), static_cast<blasint>(n),
                static_cast<blasint>(n), 1.0f, a.data<float>(), static_cast<blasint>(n), b.data<float>(),
                static_cast<blasint>(n), 0.0f, c_direct.data<float>(), static_cast<blasint>(n));
  };
  run_pair(state, clock, ours, direct, 2.0 * n * n * n, "wrapper_GFLOPs", "sgemm_GFLOPs", "wrapper_over_sgemm");
}
void gemm_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {512, 1024, 2048, 4096}) b->Arg(n);
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(8.0);  // several pairs at 4096 on a fast machine
}
BENCHMARK_CAPTURE(BM_GemmVsSgemm, wall, Clock::wall)->Apply(gemm_shapes);
BENCHMARK_CAPTURE(BM_GemmVsSgemm, cpu, Clock::process_cpu)->Apply(gemm_shapes);

// Which OpenBLAS kernels ran: 0.3.21 does not know some recent Xeons and falls
// back to "Prescott" (SSE3, ~6x slower); OPENBLAS_CORETYPE=SkylakeX fixes it.
[[maybe_unused]] const bool kContext = [] {
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::AddCustomContext("openblas_threads", std::to_string(openblas_get_num_threads()));
  return true;
}();

// --- LayerNorm and GELU forward vs memcpy of the same bytes -----------------

// Rows of 1024 (a GPT hidden size); range(0) = elements per tensor: 4 MB
// (cache), 64 MB and 256 MB (past the last-level cache of most machines).
constexpr int64_t kHidden = 1024;

void BM_LayerNormForwardVsCopy(benchmark::State& state) {
  const int64_t n = state.range(0), rows = n / kHidden;
  Tensor x = input({rows, kHidden}, "bench.x"), y = Tensor::zeros(x.shape(), DType::f32);
  Tensor gamma = input({kHidden}, "bench.gamma"), beta = input({kHidden}, "bench.beta");
  Tensor copy = Tensor::zeros(x.shape(), DType::f32);
  auto ours = [&] { benchmark::DoNotOptimize(layernorm_forward(x, gamma, beta, y)); };
  auto memcpy_same_bytes = [&] { std::memcpy(copy.raw(), x.raw(), x.nbytes()); };
  run_pair(state, Clock::thread_cpu, ours, memcpy_same_bytes, 2.0 * x.nbytes(), "layernorm_GBps", "copy_GBps",
           "layernorm_over_copy");
}
BENCHMARK(BM_LayerNormForwardVsCopy)
    ->Arg(1 << 20)
    ->Arg(16 << 20)
    ->Arg(64 << 20)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_GeluForwardVsCopy(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor x = input({n}, "bench.x"), y = Tensor::zeros({n}, DType::f32), copy = Tensor::zeros({n}, DType::f32);
  auto ours = [&] { gelu_forward(x, y); };
  auto memcpy_same_bytes = [&] { std::memcpy(copy.raw(), x.raw(), x.nbytes()); };
  run_pair(state, Clock::thread_cpu, ours, memcpy_same_bytes, 2.0 * x.nbytes(), "gelu_GBps", "copy_GBps",
           "gelu_over_copy");
}
BENCHMARK(BM_GeluForwardVsCopy)
    ->Arg(1 << 20)
    ->Arg(16 << 20)
    ->Arg(64 << 20)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// --- the other ops: bandwidth only -------------------------------------------

// Shown as "GB=<rate>/s": GB moved per second of the thread's CPU time (these
// benchmarks are single-threaded; CPU time leaves out time descheduled).
void set_bandwidth(benchmark::State& state, double bytes_per_call) {
  state.counters["GB"] = benchmark::Counter(bytes_per_call * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

constexpr int64_t kTokens = 4096;

void BM_LayerNormBackward(benchmark::State& state) {
  const int64_t h = kHidden;
  Tensor x = input({kTokens, h}, "bench.x"), dy = input({kTokens, h}, "bench.dy"),
         y = Tensor::zeros(x.shape(), DType::f32);
  Tensor gamma = input({h}, "bench.gamma"), beta = input({h}, "bench.beta");
  Tensor dx = Tensor::zeros(x.shape(), DType::f32), dgamma = Tensor::zeros({h}, DType::f32),
         dbeta = Tensor::zeros({h}, DType::f32);
  LayerNormStats stats = layernorm_forward(x, gamma, beta, y);
  for (auto _ : state) layernorm_backward(dy, x, gamma, stats, dx, dgamma, dbeta);
  set_bandwidth(state, 3.0 * x.nbytes());  // dy, x read; dx written
}
BENCHMARK(BM_LayerNormBackward)->Unit(benchmark::kMillisecond);

void BM_GeluBackward(benchmark::State& state) {
  const int64_t n = 16 << 20;
  Tensor x = input({n}, "bench.x"), dy = input({n}, "bench.dy"), dx = Tensor::zeros({n}, DType::f32);
  for (auto _ : state) gelu_backward(dy, x, dx);
  set_bandwidth(state, 3.0 * x.nbytes());
}
BENCHMARK(BM_GeluBackward)->Unit(benchmark::kMillisecond);

void BM_GeluForwardBf16(benchmark::State& state) {
  const int64_t n = 16 << 20;
  Tensor x = input({n}, "bench.x", DType::bf16), y = Tensor::zeros({n}, DType::bf16);
  for (auto _ : state) gelu_forward(x, y);
  set_bandwidth(state, 2.0 * x.nbytes());
}
BENCHMARK(BM_GeluForwardBf16)->Unit(benchmark::kMillisecond);

void BM_SoftmaxForward(benchmark::State& state) {
  const int64_t n = state.range(0);  // row length
  Tensor x = input({(16 << 20) / n, n}, "bench.x"), y = Tensor::zeros(x.shape(), DType::f32);
  for (auto _ : state) softmax_forward(x, y);
  set_bandwidth(state, 2.0 * x.nbytes());
}
BENCHMARK(BM_SoftmaxForward)->Arg(1024)->Arg(32768)->Unit(benchmark::kMillisecond);

void BM_CrossEntropyForwardBackward(benchmark::State& state) {
  const int64_t vocab = 32768, rows = 512;
  Tensor logits = input({rows, vocab}, "bench.logits"), dlogits = Tensor::zeros(logits.shape(), DType::f32);
  std::vector<int64_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = (r * 7919) % vocab;
  for (auto _ : state) {
    CrossEntropyForward fwd = cross_entropy_forward(logits, targets, LossReduction::mean);
    cross_entropy_backward(logits, targets, fwd.stats, LossReduction::mean, 1.0f, dlogits);
  }
  set_bandwidth(state, 4.0 * logits.nbytes());  // max and sum_exp passes, backward read + write
}
BENCHMARK(BM_CrossEntropyForwardBackward)->Unit(benchmark::kMillisecond);

void BM_BiasAddAndBackward(benchmark::State& state) {
  Tensor x = input({kTokens, 4 * kHidden}, "bench.x"), b = input({4 * kHidden}, "bench.b");
  Tensor db = Tensor::zeros({4 * kHidden}, DType::f32);
  for (auto _ : state) {
    bias_add(x, b, x);
    bias_backward(x, db);
  }
  set_bandwidth(state, 3.0 * x.nbytes());
}
BENCHMARK(BM_BiasAddAndBackward)->Unit(benchmark::kMillisecond);

void BM_AdamStep(benchmark::State& state) {
  const int64_t n = 8 << 20;
  Tensor p = input({n}, "bench.p"), g = input({n}, "bench.g");
  Tensor m = Tensor::zeros({n}, DType::f32), v = Tensor::zeros({n}, DType::f32);
  int64_t step = 0;
  AdamConfig config;
  config.weight_decay = 0.01;
  for (auto _ : state) adam_step(p, g, m, v, ++step, config);
  set_bandwidth(state, 7.0 * p.nbytes());  // p, g, m, v read; p, m, v written
}
BENCHMARK(BM_AdamStep)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sextant::ops
