// Achieved memory bandwidth of memory-bound ops beside a device-to-device
// copy of the same activation, in the same run (layernorm against a copy).
// Bandwidth counts each byte the op must move once: reads plus writes (a
// copy of N bytes moves 2N).
//
// Each op is one function over MemoryOperands; the table below registers
// them (layernorm: kernels/ops/cuda/rows.cu, one block per row, the row held
// in registers and moved in 16-byte vectors; gelu and adam:
// kernels/ops/cuda/elementwise.cu, 16-byte vectors). An op that fails
// reports its error instead of a number.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <functional>
#include <string>

#include "kernels/ops/adam.h"
#include "kernels/ops/cuda/cuda_common.h"
#include "kernels/ops/gelu.h"
#include "kernels/ops/layernorm.h"
#include "kernels/ops/random.h"

namespace sextant::ops {
namespace {

// x, y: [rows, h] bf16 activations; gamma, beta: [h] f32 parameters;
// p, g, m, v: [rows, h / 8] f32 (Adam on as many bytes of parameters as x has).
struct MemoryOperands {
  int64_t rows = 0, h = 0;
  Tensor x, y, gamma, beta;
  Tensor p, g, m, v;
};

struct MemoryOp {
  const char* name;
  double (*bytes)(const MemoryOperands&);  // bytes it must move per call
  void (*run)(MemoryOperands&);
};

double activation_bytes(const MemoryOperands& o) { return static_cast<double>(o.x.nbytes()); }

// Copy: read x, write y.
double copy_bytes(const MemoryOperands& o) { return 2 * activation_bytes(o); }
void copy(MemoryOperands& o) {
  SEXTANT_CHECK_CUDA(
      cudaMemcpyAsync(o.y.raw(), o.x.raw(), o.x.nbytes(), cudaMemcpyDeviceToDevice, cuda::compute_stream()));
}

// LayerNorm forward: read x, gamma, beta; write y and the f32 mean / rstd per row.
double layernorm_bytes(const MemoryOperands& o) {
  return 2 * activation_bytes(o) + static_cast<double>(o.gamma.nbytes() + o.beta.nbytes()) + 8.0 * o.rows;
}
void layernorm(MemoryOperands& o) { layernorm_forward(o.x, o.gamma, o.beta, o.y); }

// GELU forward: read x, write y.
void gelu(MemoryOperands& o) { gelu_forward(o.x, o.y); }

// Adam: read p, g, m, v; write p, m, v.
double adam_bytes(const MemoryOperands& o) { return 7.0 * static_cast<double>(o.p.nbytes()); }
void adam(MemoryOperands& o) { adam_step(o.p, o.g, o.m, o.v, 1, AdamConfig{}); }

const MemoryOp kOps[] = {
    {"copy_d2d", copy_bytes, copy},
    {"layernorm_fwd", layernorm_bytes, layernorm},
    {"gelu_fwd", copy_bytes, gelu},
    {"adam", adam_bytes, adam},
};

void run_memory_op(benchmark::State& state, const MemoryOp& op) {
  if (cuda_device_count() == 0) {
    state.SkipWithError("no CUDA device visible: GPU benchmark not run");
    return;
  }
  MemoryOperands o;
  o.rows = state.range(0);
  o.h = state.range(1);
  o.x = random_tensor({o.rows, o.h}, DType::bf16, {1, tensor_id("bench.memory.x")}, Device::cuda);
  o.y = Tensor::empty({o.rows, o.h}, DType::bf16, Device::cuda);
  o.gamma = random_tensor({o.h}, DType::f32, {1, tensor_id("bench.memory.gamma")}, Device::cuda);
  o.beta = random_tensor({o.h}, DType::f32, {1, tensor_id("bench.memory.beta")}, Device::cuda);
  const Shape params{o.rows, o.h / 8};
  o.p = random_tensor(params, DType::f32, {1, tensor_id("bench.memory.p")}, Device::cuda);
  o.g = random_tensor(params, DType::f32, {1, tensor_id("bench.memory.g")}, Device::cuda);
  o.m = Tensor::zeros(params, DType::f32, Device::cuda);
  o.v = Tensor::zeros(params, DType::f32, Device::cuda);
  try {
    for (int i = 0; i < 3; ++i) op.run(o);  // warm-up; also where a missing kernel shows
  } catch (const std::exception& e) {
    state.SkipWithError((std::string(op.name) + ": " + e.what()).c_str());
    return;
  }
  cudaStream_t stream = cuda::compute_stream();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const int batch = 20;
  for (auto _ : state) {
    cudaEventRecord(start, stream);
    for (int i = 0; i < batch; ++i) op.run(o);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(1e-3 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.counters["GB/s"] = benchmark::Counter(op.bytes(o) * batch / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes"] = op.bytes(o);
}

// rows x h: 32K tokens of a 4K and an 8K model; 256 MB and 512 MB of bf16,
// several times the 60 MB L2 so the copy measures HBM.
const bool registered = [] {
  for (const MemoryOp& op : kOps)
    benchmark::RegisterBenchmark((std::string("memory/") + op.name).c_str(),
                                 [&op](benchmark::State& st) { run_memory_op(st, op); })
        ->Args({32768, 4096})
        ->Args({32768, 8192})
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.2);
  return true;
}();

}  // namespace
}  // namespace sextant::ops
