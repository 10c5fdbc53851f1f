// What every host op needs around its loops: argument checks that name the
// op and the shapes, the compute type of a storage dtype, and f32 views of
// low-precision tensors ("widen, compute in f32, round back once").
//
// Compute type: f32 for f32 / bf16 / f16 storage; f64 storage computes in
// f64 (the f64 dtype exists for checks, not for speed).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <type_traits>

#include "harness/tensor.h"
#include "kernels/ops/simd.h"

namespace sextant::ops {

struct NamedTensor {
  const char* name;
  const Tensor* tensor;
};

// RuntimeError unless every tensor is defined and all sit on one device;
// returns that device (the op dispatches on it: host code, or cuda_ops.h).
Device require_one_device(std::string_view op, std::initializer_list<NamedTensor> tensors);
// RuntimeError "<op>: <name> [a, b] must be [c, d]" unless t has that shape.
void require_shape(std::string_view op, const char* name, const Tensor& t, const Shape& expected);
// RuntimeError unless t has at least one dimension (the row length is dim(-1)).
void require_rows(std::string_view op, const char* name, const Tensor& t);

// A tensor [..., n] seen as rows of n: the product of the leading dims.
int64_t rows_of(const Tensor& t);

// Stats dtype (mean, rstd, max, ...) for data stored in `storage`.
DType compute_dtype(DType storage);

// Calls fn(F{}) with F = double for f64 storage, float otherwise.
template <class Fn>
decltype(auto) with_compute_type(DType storage, Fn&& fn) {
  if (storage == DType::f64) return fn(double{});
  return fn(float{});
}

// t converted to `dtype` (a new tensor). bf16 <-> f32 take a vectorized path
// with the harness's rounding (nearest even, NaN kept quiet); the rest go
// through Tensor::to.
Tensor converted(const Tensor& t, DType dtype);

// Read-only F view of a host tensor: the tensor's own memory when its dtype
// is F, else a widened copy. Undefined tensors give nullptr.
template <class F>
class HostIn {
 public:
  explicit HostIn(const Tensor& t) {
    if (!t.defined()) return;
    held_ = t.dtype() == dtype_of<F>() ? t : converted(t, dtype_of<F>());
    ptr_ = held_.template data<F>();
  }
  const F* get() const { return ptr_; }

 private:
  Tensor held_;
  const F* ptr_ = nullptr;
};

// Writable F view of a host output tensor: its own memory when its dtype is
// F, else an F scratch that store() rounds into the tensor once.
template <class F>
class HostOut {
 public:
  explicit HostOut(Tensor& t) : target_(&t) {
    scratch_ = t.dtype() == dtype_of<F>() ? t : Tensor::empty(t.shape(), dtype_of<F>());
    ptr_ = scratch_.template data<F>();
  }
  F* get() { return ptr_; }
  // Rounds the F results into the target (a no-op when it was written directly).
  void store() {
    if (target_->dtype() != dtype_of<F>()) target_->copy_from(converted(scratch_, target_->dtype()));
  }

 private:
  Tensor* target_;
  Tensor scratch_;
  F* ptr_ = nullptr;
};

// Sum of term(i) for i in [0, n) with 16 independent partial sums. One
// accumulator serializes on the add latency, and without -ffast-math the
// compiler may not reassociate it; 16 lanes let it use vector registers.
// Always inlined, so that it is compiled for the ISA level of its caller
// (run_simd, simd.h).
template <class F, class Term>
inline __attribute__((always_inline)) F lane_sum(int64_t n, Term&& term) {
  constexpr int kLanes = 16;
  F acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += term(i + j);
  F tail = 0;
  for (; i < n; ++i) tail += term(i);
  for (int width = kLanes / 2; width > 0; width /= 2)  // pairwise: a balanced tree
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0] + tail;
}

// Max of x[0..n) (n > 0). NaN propagates: a lane takes v when v > lane or v
// is NaN, and keeps a NaN once it holds one. f32 runs on 8-lane vectors
// (simd.h): GCC does not vectorize the scalar form of this select.
template <class F>
inline __attribute__((always_inline)) F lane_max(const F* x, int64_t n) {
  auto take = [](F v, F current) { return (v > current) | (v != v); };
  F m = x[0];
  int64_t i = 0;
  if constexpr (std::is_same_v<F, float>) {
    constexpr int kLanes = 8;
    if (n >= kLanes) {
      f32v<kLanes> acc = load_lanes<kLanes>(x);
      for (i = kLanes; i + kLanes <= n; i += kLanes) {
        const f32v<kLanes> v = load_lanes<kLanes>(x + i);
        acc = ((v > acc) | (v != v)) ? v : acc;
      }
      m = acc[0];
      for (int j = 1; j < kLanes; ++j) m = take(acc[j], m) ? acc[j] : m;
    }
  }
  for (; i < n; ++i) m = take(x[i], m) ? x[i] : m;
  return m;
}

}  // namespace sextant::ops
