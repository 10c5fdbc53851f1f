// Shared by the GPU op tests (header only): device copies, and the check
// every CUDA op must pass (docs/CONFORMANCE.md's distributed bound, with the
// host op as the baseline): error(cuda) <= max(2 error(host), floor(dtype)) against the
// float64 reference, no NaN or Inf.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "harness/compare.h"
#include "harness/rng.h"
#include "harness/tensor.h"
#include "harness/testing/gpu.h"
#include "harness/tolerance.h"

namespace sextant::ops::testing {

inline Tensor gpu(const Tensor& t) { return t.to(Device::cuda); }
inline Tensor host(const Tensor& t) { return t.is_host() ? t : t.to(Device::host); }

inline Tensor input(const Shape& shape, DType dtype, const std::string& name, double scale = 1.0) {
  return random_tensor(shape, dtype, {42, tensor_id(name), scale});
}

// cuda (on the device or copied back) against ref: within the gate of its
// tolerance row, and bounded by the host op's error like a distributed run.
inline ::testing::AssertionResult cuda_conforms(const Tensor& cuda, const Tensor& host_op, const Tensor& ref,
                                                DType dtype, OpClass cls) {
  const ErrorStats e_cuda = compare(host(cuda), ref), e_host = compare(host_op, ref);
  const double bound = std::min(distributed_bound(dtype, cls, e_host.rel_l2), baseline_gate(dtype, cls));
  if (e_cuda.nonfinite == 0 && e_cuda.rel_l2 <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << dtype_name(dtype) << ": CUDA error " << e_cuda.rel_l2 << " > bound " << bound
                                       << " (host error " << e_host.rel_l2 << ", max abs " << e_cuda.max_abs
                                       << ", nonfinite " << e_cuda.nonfinite << ")";
}

// Elements whose bits differ (same dtype and shape).
inline int64_t differing_elements(const Tensor& a, const Tensor& b) {
  const Tensor x = host(a), y = host(b);
  const size_t elem = dtype_size(x.dtype());
  auto* px = static_cast<const unsigned char*>(x.raw());
  auto* py = static_cast<const unsigned char*>(y.raw());
  int64_t differ = 0;
  for (int64_t i = 0; i < x.numel(); ++i) differ += std::memcmp(px + i * elem, py + i * elem, elem) != 0;
  return differ;
}

}  // namespace sextant::ops::testing
