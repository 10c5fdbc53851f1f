// What the cuBLASLt products share (gemm.cu, gemm_fp8_cublaslt.cc): this thread's
// handle and workspace, and owning handles of its descriptors.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <type_traits>

namespace sextant::ops::cuda {

// 32 MiB, as PyTorch gives cuBLASLt on Hopper.
inline constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;
cublasLtHandle_t lt_handle();
// kLtWorkspaceBytes on the current device, kept for the life of the thread.
void* lt_workspace();

template <class T, cublasStatus_t (*destroy)(T)>
struct LtDeleter {
  void operator()(T p) const { destroy(p); }
};
using MatmulDesc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>,
                                   LtDeleter<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>>;
using Layout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>,
                               LtDeleter<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>>;
using Preference = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                                   LtDeleter<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>>;

// A column-major rows x cols matrix of `type` with leading dimension ld.
Layout lt_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld);
// A preference allowing kLtWorkspaceBytes of workspace.
Preference lt_preference();

}  // namespace sextant::ops::cuda
