// How an op reaches its CUDA implementation. Every op is one free function
// that dispatches on the tensors' device: host code inline, CUDA code in
// kernels/ops/cuda/*.cu behind the declarations of cuda_ops.h. In a build
// without CUDA no device tensor can exist (Tensor::empty refuses), and the
// CUDA branch is compiled out to a clear error.
#pragma once

#include <string>

#include "kernels/ops/cuda_ops.h"

namespace sextant::ops {

[[noreturn]] void no_cuda(const char* op);

// no_cuda with the type of the call it stands for, so that a dispatch like
// `return SEXTANT_CUDA_CALL(cuda::op(...))` compiles for ops that return a
// value too (the call itself is never evaluated, nor linked).
template <class Result>
[[noreturn]] Result no_cuda_as(const char* op) {
  no_cuda(op);
}

}  // namespace sextant::ops

#if defined(SEXTANT_HAVE_CUDA)
#define SEXTANT_CUDA_CALL(call) call
#else
#define SEXTANT_CUDA_CALL(call) ::sextant::ops::no_cuda_as<decltype(call)>(#call)
#endif
