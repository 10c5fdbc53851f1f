// Shared by the op tests (header only, included by *_test.cc): inputs from
// the deterministic RNG and the conformance check of an op against the
// float64 reference with the tolerance table of harness/tolerance.h.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "harness/tolerance.h"
#include "kernels/ops/simd.h"

namespace sextant::ops::testing {

// The storage dtypes every op is tested in.
inline constexpr DType kTestDtypes[] = {DType::f32, DType::bf16, DType::f16};

inline Tensor random_input(const Shape& shape, DType dtype, const std::string& name, double scale = 1.0) {
  return random_tensor(shape, dtype, {42, tensor_id(name), scale});
}

// A small f32 matrix from its values, row-major.
inline Tensor f32_matrix(int64_t rows, int64_t cols, const std::vector<double>& values) {
  return Tensor::from_values({rows, cols}, values, DType::f32);
}

// error(op) <= gate(dtype, op class): the op (in `dtype` storage) against
// the f64 reference computed from the same rounded inputs, held to the
// baseline gate of its row.
inline ::testing::AssertionResult matches_reference(const Tensor& op, const Tensor& ref, DType dtype, OpClass cls) {
  const ErrorStats e = compare(op, ref);
  const double gate = baseline_gate(dtype, cls);
  if (e.nonfinite == 0 && e.rel_l2 <= gate) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << dtype_name(dtype) << " " << op_class_name(cls) << ": error " << e.rel_l2
                                       << " > gate " << gate << " (max abs " << e.max_abs << ", nonfinite "
                                       << e.nonfinite << ")";
}

// The opposite, for the tests that show a check can fail.
inline ::testing::AssertionResult differs_from_reference(const Tensor& op, const Tensor& ref, DType dtype,
                                                         OpClass cls) {
  const ErrorStats e = compare(op, ref);
  if (e.rel_l2 > baseline_gate(dtype, cls)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << dtype_name(dtype) << ": error " << e.rel_l2 << " is within the gate";
}

// Runs body once per lane width this CPU has (4, 8, 16: baseline, AVX2,
// AVX-512 code paths of simd.h), with the width as argument.
template <class Body>
void for_each_lane_width(Body&& body) {
  const int widest = simd_lanes();
  for (int lanes = 4; lanes <= widest; lanes *= 2) {
    const int previous = limit_simd_lanes(lanes);
    body(lanes);
    limit_simd_lanes(previous);
  }
}

// Runs body and checks that it throws RuntimeError whose message contains `needle`.
template <class Body>
::testing::AssertionResult throws_naming(Body&& body, const std::string& needle) {
  try {
    body();
  } catch (const RuntimeError& e) {
    if (std::string(e.what()).find(needle) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "message '" << e.what() << "' lacks '" << needle << "'";
  }
  return ::testing::AssertionFailure() << "no RuntimeError";
}

}  // namespace sextant::ops::testing
