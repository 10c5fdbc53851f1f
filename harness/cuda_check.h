// The one error check for CUDA runtime calls (CUDA builds only): a failed
// call throws RuntimeError naming the call and where it was made.
//
//   SEXTANT_CHECK_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
//   kernel<<<grid, block, 0, stream>>>(...);
//   SEXTANT_CHECK_LAUNCH("gelu_forward");  // the launch's own error
#pragma once

#include <cuda_runtime.h>

namespace sextant {

// Throws RuntimeError "<what> failed at <file>:<line>: <CUDA's message>" unless status is cudaSuccess.
void check_cuda(cudaError_t status, const char* what, const char* file, int line);

}  // namespace sextant

#define SEXTANT_CHECK_CUDA(call) ::sextant::check_cuda((call), #call, __FILE__, __LINE__)
#define SEXTANT_CHECK_LAUNCH(kernel) ::sextant::check_cuda(cudaGetLastError(), kernel, __FILE__, __LINE__)
