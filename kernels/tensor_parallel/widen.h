// Host compute views for the few element-wise loops of this library:
// "widen, compute in f32 (f64 for f64 storage), round back once".
#pragma once

#include "harness/tensor.h"

namespace sextant::tp {

// Calls fn(F{}) with F = double for f64 storage, float otherwise.
template <class Fn>
decltype(auto) with_compute_type(DType storage, Fn&& fn) {
  if (storage == DType::f64) return fn(double{});
  return fn(float{});
}

// t in F: t itself (shared storage) when it already is, else a widened copy.
template <class F>
Tensor widened(const Tensor& t) {
  return t.dtype() == dtype_of<F>() ? t : t.to(dtype_of<F>());
}

// Writes computed (an F tensor of target's shape) into target, rounding once;
// nothing to do when computed is target's own storage.
inline void store_rounded(Tensor& target, const Tensor& computed) {
  if (computed.raw() == target.raw()) return;
  target.copy_from(computed.dtype() == target.dtype() ? computed : computed.to(target.dtype()));
}

}  // namespace sextant::tp
