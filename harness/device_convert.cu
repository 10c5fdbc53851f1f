// Tensor::to(DType) on the device: one element per thread, rounded exactly
// as the host conversion rounds (harness/dtype.h): the source widened to
// double (exact), then double -> float -> 16-bit, each step to nearest even.
// bf16 rounding is the host's bit recipe (NaN kept quiet and signed), so a
// converted tensor is bit-identical to the host's Tensor::to of the same
// values; f16 uses __float2half_rn (IEEE round to nearest even, subnormals,
// overflow to inf), which differs from the host only in a NaN's payload.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "harness/device.h"
#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {

struct Bf16Bits {
  uint16_t bits;
};
struct F16Bits {
  uint16_t bits;
};

__device__ double widen(double x) { return x; }
__device__ double widen(float x) { return x; }
__device__ double widen(Bf16Bits x) { return __uint_as_float(static_cast<uint32_t>(x.bits) << 16); }
__device__ double widen(F16Bits x) { return __half2float(__ushort_as_half(x.bits)); }

// harness/dtype.h float_to_bf16_bits, bit for bit.
__device__ uint16_t float_to_bf16_bits(float x) {
  const uint32_t u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

__device__ void narrow_to(double* dst, double x) { *dst = x; }
__device__ void narrow_to(float* dst, double x) { *dst = __double2float_rn(x); }
__device__ void narrow_to(Bf16Bits* dst, double x) { dst->bits = float_to_bf16_bits(__double2float_rn(x)); }
__device__ void narrow_to(F16Bits* dst, double x) {
  dst->bits = __half_as_ushort(__float2half_rn(__double2float_rn(x)));
}

template <class D, class S>
__global__ void convert_kernel(D* dst, const S* src, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    narrow_to(dst + i, widen(src[i]));
}

template <class Fn>
void with_type(DType d, Fn&& fn) {
  switch (d) {
    case DType::f64: return fn(double{});
    case DType::f32: return fn(float{});
    case DType::bf16: return fn(Bf16Bits{});
    case DType::f16: return fn(F16Bits{});
  }
}

}  // namespace

void cuda_convert(void* dst, DType dst_dtype, const void* src, DType src_dtype, size_t n) {
  if (n == 0) return;
  const int threads = 256;
  const size_t wanted = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(wanted < 65535 * 8 ? wanted : 65535 * 8);
  auto stream = static_cast<cudaStream_t>(cuda_compute_stream());
  with_type(dst_dtype, [&](auto d) {
    with_type(src_dtype, [&](auto s) {
      using D = decltype(d);
      using S = decltype(s);
      convert_kernel<D, S><<<blocks, threads, 0, stream>>>(static_cast<D*>(dst), static_cast<const S*>(src), n);
    });
  });
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw RuntimeError(cat("cuda_convert kernel launch: ", cudaGetErrorString(status)));
}

}  // namespace sextant
