// gemm bf16 on the GPU: our wrapper (ops::gemm, row-major over cuBLAS)
// beside cublasGemmEx called directly on the same buffers, in the same run,
// interleaved size by size so clock drift hits both alike. Goal:
// the wrapper at >= 95% of direct cuBLAS at 8192^3. Beside them the FP8
// product (E4M3 x E4M3 -> bf16, cuBLASLt's TN layout) at 4096^3 and 8192^3,
// with per-tensor scales and with Float8BlockScaling's
// (1x128 runs of a, 128x128 tiles of b), both through
// cuda::fp8_matmul_tn_scaled, for
// torch._scaled_mm to be run beside them.
//
// Timing: CUDA events around a batch of products (>= ~2 ms of work), after
// warm-up; inputs random (never zeros: zeros run faster than real data).
// Counter TFLOP/s = 2 m n k / time. Without a GPU every case reports the
// reason as its error.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "kernels/ops/cuda/cuda_common.h"
#include "kernels/ops/cuda/gemm_fp8_cublaslt.h"
#include "kernels/ops/cuda_ops.h"
#include "kernels/ops/fp8.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/random.h"

namespace sextant::ops {
namespace {

struct Operands {
  Tensor a, b, c;  // a: [m, k], b: [k, n], c: [m, n], bf16 on the GPU
};

Operands make_operands(int64_t s) {
  return {random_tensor({s, s}, DType::bf16, {1, tensor_id("bench.gemm.a")}, Device::cuda),
          random_tensor({s, s}, DType::bf16, {1, tensor_id("bench.gemm.b")}, Device::cuda),
          Tensor::empty({s, s}, DType::bf16, Device::cuda)};
}

// The direct call: column-major C^T = B^T A^T, exactly what a cuBLAS user
// writes for row-major data, same compute type and algorithm choice.
void cublas_direct(Operands& o, int64_t s) {
  const float alpha = 1.0f, beta = 0.0f;
  const int n = static_cast<int>(s);
  cuda::check_cublas(cublasGemmEx(cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, o.b.raw(),
                                  CUDA_R_16BF, n, o.a.raw(), CUDA_R_16BF, n, &beta, o.c.raw(), CUDA_R_16BF, n,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
}

void wrapper(Operands& o, int64_t) { gemm(o.a, false, o.b, false, o.c); }

// A device copy of host values, freed with it.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& values) {
    cudaMalloc(&p_, values.size() * sizeof(T));
    cudaMemcpy(p_, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

std::vector<uint8_t> random_e4m3_codes(int64_t count, std::mt19937& rng) {
  std::vector<uint8_t> codes(static_cast<size_t>(count));
  for (uint8_t& c : codes) c = static_cast<uint8_t>((rng() & 0x80) | ((4 + rng() % 7) << 3) | (rng() & 0x7));
  return codes;
}

// FP8 operands of one size on the GPU: random finite E4M3 codes of
// magnitude 1/8..8 (never zeros), both k-major, a bf16 D, and decode scales
// of 1 in each mode's layout, every scale array an allocation of its own:
// with b's scale 4 bytes into a's allocation an H200 refused the per-tensor
// product at 4096^3 and 8192^3 (CUBLAS_STATUS_NOT_SUPPORTED from every
// algorithm offered), while gemm_fp8's separately allocated scales ran at the
// ops suite's sizes.
struct Fp8Operands {
  explicit Fp8Operands(int64_t s)
      : rng(7),
        a(random_e4m3_codes(s * s, rng)),
        b(random_e4m3_codes(s * s, rng)),
        d(std::vector<uint16_t>(static_cast<size_t>(s * s))),
        a_scale(std::vector<float>{1}),
        b_scale(std::vector<float>{1}),
        a_runs(std::vector<float>(static_cast<size_t>(s / 128 * s), 1)),
        b_tiles(std::vector<float>(static_cast<size_t>(s / 128 * ((s / 128 + 3) / 4 * 4)), 1)) {}
  std::mt19937 rng;
  DeviceArray<uint8_t> a, b;  // [s, s]
  DeviceArray<uint16_t> d;    // [s, s] bf16
  DeviceArray<float> a_scale, b_scale;
  DeviceArray<float> a_runs;   // 1x128 runs: [s / 128, s]
  DeviceArray<float> b_tiles;  // 128x128 tiles: [s / 128, s / 128 padded to 4]
};

Fp8Operands& fp8_operands(int64_t s) {
  static std::map<int64_t, std::unique_ptr<Fp8Operands>> by_size;
  std::unique_ptr<Fp8Operands>& o = by_size[s];
  if (!o) o = std::make_unique<Fp8Operands>(s);
  return *o;
}

void fp8_tn(Operands&, int64_t s) {
  Fp8Operands& o = fp8_operands(s);
  cuda::fp8_matmul_tn_scaled({o.a.get(), Fp8Format::e4m3, cuda::Fp8ScaleMode::tensor, o.a_scale.get()},
                             {o.b.get(), Fp8Format::e4m3, cuda::Fp8ScaleMode::tensor, o.b_scale.get()}, o.d.get(),
                             DType::bf16, s, s, s);
}

void fp8_tn_block(Operands&, int64_t s) {
  Fp8Operands& o = fp8_operands(s);
  cuda::fp8_matmul_tn_scaled({o.a.get(), Fp8Format::e4m3, cuda::Fp8ScaleMode::vec128, o.a_runs.get()},
                             {o.b.get(), Fp8Format::e4m3, cuda::Fp8ScaleMode::blk128, o.b_tiles.get()}, o.d.get(),
                             DType::bf16, s, s, s);
}

// Times `product` in event-timed batches; one benchmark iteration = one batch.
void run_gemm(benchmark::State& state, const std::function<void(Operands&, int64_t)>& product) {
  if (cuda_device_count() == 0) {
    state.SkipWithError("no CUDA device visible: GPU benchmark not run");
    return;
  }
  const int64_t s = state.range(0);
  const double flops = 2.0 * s * s * s;
  Operands o = make_operands(s);
  const int batch = static_cast<int>(std::clamp(2e-3 * 500e12 / flops, 1.0, 1000.0));  // ~2 ms at 500 TFLOP/s
  cudaStream_t stream = cuda::compute_stream();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  try {
    for (int i = 0; i < 3; ++i) product(o, s);  // warm-up: handle, heuristics, clocks
  } catch (const std::exception& e) {           // a product this device or cuBLAS lacks: its reason, not a crash
    state.SkipWithError(e.what());
    return;
  }
  cudaStreamSynchronize(stream);
  for (auto _ : state) {
    cudaEventRecord(start, stream);
    for (int i = 0; i < batch; ++i) product(o, s);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(1e-3 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (cudaGetLastError() != cudaSuccess) state.SkipWithError("CUDA error during the benchmark");
  state.counters["TFLOP/s"] = benchmark::Counter(flops * batch / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["batch"] = batch;
  state.counters["size"] = static_cast<double>(s);
}

// Interleaved registration: for each size, wrapper then direct.
const bool registered = [] {
  for (int64_t s : {1024, 2048, 4096, 8192}) {
    benchmark::RegisterBenchmark("gemm_bf16/wrapper", [](benchmark::State& st) { run_gemm(st, wrapper); })
        ->Arg(s)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.3);
    benchmark::RegisterBenchmark("gemm_bf16/cublas_direct", [](benchmark::State& st) { run_gemm(st, cublas_direct); })
        ->Arg(s)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.3);
    if (s < 4096) continue;
    benchmark::RegisterBenchmark("gemm_fp8_e4m3/cublaslt_tn", [](benchmark::State& st) { run_gemm(st, fp8_tn); })
        ->Arg(s)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.3);
    benchmark::RegisterBenchmark("gemm_fp8_e4m3/cublaslt_tn_block",
                                 [](benchmark::State& st) { run_gemm(st, fp8_tn_block); })
        ->Arg(s)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.3);
  }
  return true;
}();

}  // namespace
}  // namespace sextant::ops
