#include "kernels/ops/cuda/cuda_common.h"

#include "harness/device.h"
#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::ops::cuda {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw RuntimeError(cat(what, ": cuBLAS status ", static_cast<int>(status)));
}

cudaStream_t compute_stream() {
  // Owned by the harness, so its region timer and communicators order
  // against the same stream the ops run on.
  return static_cast<cudaStream_t>(cuda_compute_stream());
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
