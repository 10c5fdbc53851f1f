#include "kernels/ops/cuda/device_common.cuh"

namespace sextant::ops::cuda {

void require_dtype(const char* op, const char* name, const Tensor& t, DType d) {
  if (t.dtype() != d)
    throw RuntimeError(cat(op, ": ", name, " is ", dtype_name(t.dtype()), " but the activations are ", dtype_name(d),
                           " (on CUDA the activations of one call share a dtype)"));
}

Tensor as_dtype(const Tensor& t, DType d) { return t.dtype() == d ? t : t.to(d); }

Scratch::Scratch(size_t bytes) { SEXTANT_CHECK_CUDA(cudaMallocAsync(&ptr_, bytes > 0 ? bytes : 1, compute_stream())); }

Scratch::~Scratch() {
  if (ptr_) cudaFreeAsync(ptr_, compute_stream());
}

DeviceIds::DeviceIds(std::span<const int64_t> ids) : scratch_(ids.size_bytes()) {
  if (!ids.empty())
    SEXTANT_CHECK_CUDA(
        cudaMemcpyAsync(scratch_.get(), ids.data(), ids.size_bytes(), cudaMemcpyHostToDevice, compute_stream()));
}

}  // namespace sextant::ops::cuda
