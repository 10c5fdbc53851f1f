// Our attention block on the GPU (ops::attention_block_forward / _backward
// on device tensors), bf16, d = 128, s = 4096..16384, causal and not, for
// scripts/bench_attention.py, which puts PyTorch's best
// scaled_dot_product_attention beside it (goal: at least 50% of it).
//
// Names: attention_bf16/<fwd|fwd_bwd>/<causal|full>/<seq>, counter TFLOP/s
// with FLOPs as flash-attention's benchmarks/benchmark_flash_attention.py
// counts them: forward 4 b s^2 h d (half when causal), backward 2.5x
// forward. attention_bf16/<pass>/packed/<seq>: every row packs eight causal
// sequences of s/2, s/4, ..., s/128, s/128 tokens (THD), FLOPs
// counted on those sequences alone (sum of 4 b L^2 h d / 2), not on s^2. attention_bf16 measures the kernels the
// suites use on a GPU by default (attention_impl=cudnn: cuDNN's fused SDPA, the packed rows cut into one call per
// sequence); attention_own_bf16 the same passes on our tensor-core kernels (attention_mma.cu). fwd_bwd is the
// forward, the delta and the backward with its f32 dQ/dK/dV accumulators zeroed, as a training step calls them.
// A case that fails reports its error instead of a number.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/ops/attention_block.h"
#include "kernels/ops/cuda/cuda_common.h"
#include "kernels/ops/random.h"

namespace sextant::ops {
namespace {

constexpr int64_t kBatch = 2, kHeads = 16, kHeadDim = 128;  // as bench_attention.py's defaults

struct Inputs {
  Tensor q, k, v, dout;  // [b, s, h, d] bf16 on the GPU
  AttentionMask mask;
  AttentionImpl impl = AttentionImpl::cudnn;
};

enum class Mask { full, causal, packed };

// The packed row: s/2, s/4, ..., s/128 and s/128 again (summing to s).
std::vector<int64_t> packed_lengths(int64_t s) {
  std::vector<int64_t> lengths;
  for (int64_t n = s / 2; lengths.size() < 7; n /= 2) lengths.push_back(n);
  lengths.push_back(lengths.back());
  return lengths;
}

AttentionMask mask_of(Mask kind, int64_t s) {
  if (kind == Mask::full) return AttentionMask::none();
  if (kind == Mask::causal) return AttentionMask::causal_blocks(0, s, 0, s);
  std::vector<int64_t> pos, seq;
  int64_t start = 0;
  for (int64_t n : packed_lengths(s)) {
    for (int64_t i = 0; i < n; ++i) pos.push_back(start + i), seq.push_back(start);
    start += n;
  }
  return AttentionMask::causal_packed(pos, seq, pos, seq);
}

// Forward FLOPs of the real (query, key) work: 4 b h d times s^2, halved when
// causal, or the sum of L^2 / 2 over the packed sequences.
double forward_flops(Mask kind, int64_t s) {
  double squares = static_cast<double>(s) * s * (kind == Mask::full ? 1.0 : 0.5);
  if (kind == Mask::packed) {
    squares = 0;
    for (int64_t n : packed_lengths(s)) squares += 0.5 * static_cast<double>(n) * n;
  }
  return 4.0 * kBatch * squares * kHeads * kHeadDim;
}

Inputs make_inputs(int64_t s, Mask kind, AttentionImpl impl) {
  const Shape shape{kBatch, s, kHeads, kHeadDim};
  auto input = [&](const char* name) { return random_tensor(shape, DType::bf16, {1, tensor_id(name)}, Device::cuda); };
  return {input("bench.attn.q"),    input("bench.attn.k"), input("bench.attn.v"),
          input("bench.attn.dout"), mask_of(kind, s),      impl};
}

void forward(Inputs& in) { attention_block_forward(in.q, in.k, in.v, in.mask, DType::bf16, in.impl); }

void forward_backward(Inputs& in) {
  AttentionOut o = attention_block_forward(in.q, in.k, in.v, in.mask, DType::bf16, in.impl);
  attention_block_backward(in.q, in.k, in.v, o.out, o.lse, in.dout, in.mask, in.impl);
}

void run_attention(benchmark::State& state, bool backward, Mask kind, AttentionImpl impl) {
  if (cuda_device_count() == 0) {
    state.SkipWithError("no CUDA device visible: GPU benchmark not run");
    return;
  }
  const int64_t s = state.range(0);
  const double flops = forward_flops(kind, s) * (backward ? 3.5 : 1.0);
  Inputs in = make_inputs(s, kind, impl);
  auto pass = backward ? forward_backward : forward;
  try {
    for (int i = 0; i < 2; ++i) pass(in);  // warm-up; also where a missing kernel shows
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("attention block on CUDA: ") + e.what()).c_str());
    return;
  }
  cudaStream_t stream = cuda::compute_stream();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (auto _ : state) {
    cudaEventRecord(start, stream);
    pass(in);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(1e-3 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.counters["TFLOP/s"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}

const bool registered = [] {
  for (AttentionImpl impl : {AttentionImpl::cudnn, AttentionImpl::own})
    for (bool backward : {false, true})
      for (Mask kind : {Mask::full, Mask::causal, Mask::packed}) {
        if (impl == AttentionImpl::own && kind == Mask::packed) continue;  // the device check's time is short
        const char* mask = kind == Mask::full ? "full" : kind == Mask::causal ? "causal" : "packed";
        std::string name = std::string(impl == AttentionImpl::cudnn ? "attention_bf16/" : "attention_own_bf16/") +
                           (backward ? "fwd_bwd/" : "fwd/") + mask;
        benchmark::RegisterBenchmark(
            name.c_str(), [backward, kind, impl](benchmark::State& st) { run_attention(st, backward, kind, impl); })
            ->Arg(4096)
            ->Arg(8192)
            ->Arg(16384)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.2);
      }
  return true;
}();

}  // namespace
}  // namespace sextant::ops
