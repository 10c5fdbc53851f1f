// What the .cu files of the ops share: device storage types and their
// conversions (widen on load, round once on store, as the host ops do),
// host-side dispatch over a tensor's dtype, launch helpers, warp and block
// reductions, and stream-ordered scratch memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>

#include "harness/error.h"
#include "harness/strings.h"
#include "harness/tensor.h"
#include "kernels/ops/cuda/cuda_common.h"

namespace sextant::ops::cuda {

// Compute type of a storage type: f32, f64 for f64 storage.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ double widen(double x) { return x; }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }

// Rounds a compute value to storage type T (16-bit from double through float,
// as the host's from_double does).
template <class T>
__device__ __forceinline__ T narrow_to(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else if constexpr (std::is_same_v<T, double>) return static_cast<double>(x);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}
template <class T>
__device__ __forceinline__ T narrow_to(double x) {
  if constexpr (std::is_same_v<T, double>) return x;
  else return narrow_to<T>(__double2float_rn(x));
}

// Calls fn(T{}) with the device storage type of dtype.
template <class Fn>
void with_storage(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f64: return fn(double{});
    case DType::f32: return fn(float{});
    case DType::bf16: return fn(__nv_bfloat16{});
    case DType::f16: return fn(__half{});
  }
}

// Typed device pointers of a tensor (no dtype check: the caller dispatched on it).
template <class T>
T* ptr(Tensor& t) {
  return static_cast<T*>(t.raw());
}
template <class T>
const T* ptr(const Tensor& t) {
  return static_cast<const T*>(t.raw());
}

// RuntimeError "<op>: <name> is <dtype>, the activations are <dtype>" unless t has dtype d.
void require_dtype(const char* op, const char* name, const Tensor& t, DType d);
// t in dtype d on the device: t itself when it already is, else a converted copy.
Tensor as_dtype(const Tensor& t, DType d);

// Blocks for a grid-stride loop over n elements.
inline int grid_for(int64_t n, int threads) {
  const int64_t wanted = (n + threads - 1) / threads;
  return static_cast<int>(wanted < 65535 * 8 ? (wanted > 0 ? wanted : 1) : 65535 * 8);
}
// Throws RuntimeError naming `what` when the last launch failed.

// exp and log in the compute type (f32 math for f32, f64 for f64).
template <class F>
__device__ __forceinline__ F exp_of(F x) {
  if constexpr (std::is_same_v<F, double>) return exp(x);
  else return expf(x);
}
template <class F>
__device__ __forceinline__ F log_of(F x) {
  if constexpr (std::is_same_v<F, double>) return log(x);
  else return logf(x);
}

// 16 bytes of storage moved by one load or store, widened to the compute
// type: memory-bound kernels move a vector of kWidth consecutive elements per
// thread (a bf16 element alone uses an eighth of what a load can carry).
// Index i: elements [i kWidth, (i + 1) kWidth) of a 16-byte aligned array.
template <class T>
struct Vec16 {
  static constexpr int kWidth = 16 / sizeof(T);
  compute_t<T> v[kWidth];

  __device__ __forceinline__ static Vec16 load(const T* p, int64_t i) {
    const uint4 raw = reinterpret_cast<const uint4*>(p)[i];
    const T* e = reinterpret_cast<const T*>(&raw);
    Vec16 out;
#pragma unroll
    for (int j = 0; j < kWidth; ++j) out.v[j] = widen(e[j]);
    return out;
  }
  __device__ __forceinline__ void store(T* p, int64_t i) const {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) e[j] = narrow_to<T>(v[j]);
    reinterpret_cast<uint4*>(p)[i] = raw;
  }
};

// Whole 16-byte vectors in n elements of T when every pointer is 16-byte
// aligned (tensor allocations are), else 0: the kernel then goes element by
// element. Kernels take the tail past the vectors element by element.
template <class T>
int64_t vectors_of(int64_t n, std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return 0;
  return n / Vec16<T>::kWidth;
}

__device__ __forceinline__ int64_t global_thread() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

template <class F>
__device__ __forceinline__ F warp_sum(F v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// Max that propagates NaN, as the host's lane_max: a NaN, once taken, stays.
template <class F>
__device__ __forceinline__ F nan_max(F current, F v) {
  return (v > current || v != v) ? v : current;
}
template <class F>
__device__ __forceinline__ F warp_max(F v) {
  for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum / max over the block (blockDim.x a multiple of 32, at most 1024);
// every thread gets the result. scratch: 32 entries of shared memory.
template <class F>
__device__ F block_sum(F v, F* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  F total = lane < warps ? scratch[lane] : F(0);
  return warp_sum(total);
}
template <class F>
__device__ F block_max(F v, F* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  F m = lane < warps ? scratch[lane] : F(-INFINITY);
  return warp_max(m);
}

// Threads per block for one row of n elements: a warp for short rows, up to 256.
inline int row_threads(int64_t n) {
  if (n <= 64) return 32;
  if (n <= 512) return 64;
  if (n <= 2048) return 128;
  return 256;
}

// Device memory for the life of one op, ordered on the compute stream
// (cudaMallocAsync / cudaFreeAsync): no device-wide synchronization as
// cudaFree has. Only compute-stream kernels may use it.
class Scratch {
 public:
  explicit Scratch(size_t bytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// A copy of host values on the device (targets, token ids), as int64.
class DeviceIds {
 public:
  explicit DeviceIds(std::span<const int64_t> ids);
  const int64_t* get() const { return static_cast<const int64_t*>(scratch_.get()); }

 private:
  Scratch scratch_;
};

}  // namespace sextant::ops::cuda
