// cuBLASLt's FP8 product on device buffers, with each operand's decode
// scales in one of the modes cuBLASLt reads (gemm_fp8_cublaslt.cc runs it
// after uploading a host Fp8Tensor; ops_cuda_bench times it).
#pragma once

#include <cstdint>

#include "harness/tensor.h"
#include "kernels/ops/fp8.h"

namespace sextant::ops::cuda {

// How cuBLASLt reads one operand's decode scales (device floats), for an
// operand stored [outer, k] row-major (k contiguous):
//   tensor  one scale;
//   vec128  one per 1 x 128 run along k, laid out [k / 128, outer padded
//           to 4] row-major, outer contiguous (VEC128_32F);
//   blk128  one per 128 x 128 tile, laid out [outer / 128, k / 128 padded
//           to 4] row-major (BLK128x128_32F).
// The block modes are cuBLAS 12.9's on compute capability 9.0 (Hopper): sizes
// multiples of 128, and not both operands blk128.
enum class Fp8ScaleMode { tensor, vec128, blk128 };

struct Fp8DeviceOperand {
  const void* codes;  // [outer, k], one byte per element
  Fp8Format format;
  Fp8ScaleMode mode;
  const float* scales;  // device, in mode's layout
};

// d [m, n] = a [m, k] b [n, k]^T, products and sums in f32, d row-major f32
// or bf16. Throws a RuntimeError of one line where the device or the
// installed cuBLAS lacks the operands' scale modes.
void fp8_matmul_tn_scaled(const Fp8DeviceOperand& a, const Fp8DeviceOperand& b, void* d, DType d_dtype, int64_t m,
                          int64_t n, int64_t k);

// The scale modes' size rule: 16 for per-tensor scales, 128 for block modes.
int64_t fp8_size_multiple(Fp8ScaleMode a, Fp8ScaleMode b);

}  // namespace sextant::ops::cuda
