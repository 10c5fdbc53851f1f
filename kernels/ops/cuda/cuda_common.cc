#include "kernels/ops/cuda/cuda_common.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::ops::cuda {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw RuntimeError(cat(what, ": ", cudaGetErrorString(status)));
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw RuntimeError(cat(what, ": cuBLAS status ", static_cast<int>(status)));
}

cudaStream_t compute_stream() {
  thread_local cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    // A blocking stream: it orders with the legacy default stream that the
    // harness uses for copies, so a copy never reads an unfinished result.
    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
    return s;
  }();
  return stream;
}

cublasHandle_t cublas_handle() {
  thread_local cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), "cublasCreate");
    check_cublas(cublasSetStream(h, compute_stream()), "cublasSetStream");
    return h;
  }();
  return handle;
}

}  // namespace sextant::ops::cuda
