// Shared helpers of the CUDA ops: error checks, the cuBLAS handle, the
// compute stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "harness/cuda_check.h"

namespace sextant::ops::cuda {

void check_cublas(cublasStatus_t status, const char* what);
// The stream every op runs on (per thread, current device): the harness's
// cuda_compute_stream(). Communicators order against it with events.
cudaStream_t compute_stream();
// A cuBLAS handle bound to compute_stream().
cublasHandle_t cublas_handle();

}  // namespace sextant::ops::cuda
