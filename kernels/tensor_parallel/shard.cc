#include "kernels/tensor_parallel/shard.h"

#include <cstring>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/ops/random.h"
#include "kernels/tensor_parallel/widen.h"

namespace sextant::tp {

Tensor random_shard(const Shape& global, int dim, int parts, int index, DType dtype, const RandomSpec& spec,
                    Device device) {
  if (global.at(dim) % parts != 0)
    throw RuntimeError(cat("random_shard: ", parts, " parts do not divide dim ", dim, " of ", shape_string(global)));
  Shape offset(global.size(), 0), local = global;
  local[dim] = global[dim] / parts;
  offset[dim] = local[dim] * index;
  return ops::random_block(global, offset, local, dtype, spec, device);
}

namespace {

// x seen as [outer, D, inner] around `dim`.
struct Around {
  int64_t outer = 1, d = 1, inner = 1;
};
Around around(const Shape& shape, int dim) {
  Around a;
  for (int i = 0; i < dim; ++i) a.outer *= shape[i];
  a.d = shape[dim];
  for (size_t i = dim + 1; i < shape.size(); ++i) a.inner *= shape[i];
  return a;
}

void require_defined(const char* op, const Tensor& t) {
  if (!t.defined()) throw RuntimeError(cat(op, ": needs a defined tensor"));
}

// On a device, the reorder is one permute: [outer, n, rest] <-> [n, outer, rest].
Tensor swap_outer_and_parts(const Tensor& x, int64_t a, int64_t b, int64_t rest, const Shape& out_shape) {
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  SEXTANT_CUDA_CALL(ops::cuda::permute_rows(x, {a, b, rest}, {1, 0, 2}, out));
  return out;
}

}  // namespace

Tensor split_dim_to_front(const Tensor& x, int dim, int n) {
  require_defined("split_dim_to_front", x);
  const Around a = around(x.shape(), dim);
  if (a.d % n != 0)
    throw RuntimeError(
        cat("split_dim_to_front: ", n, " parts do not divide dim ", dim, " of ", shape_string(x.shape())));
  Shape out_shape{n};
  for (int i = 0; i < x.ndim(); ++i) out_shape.push_back(i == dim ? a.d / n : x.dim(i));
  if (a.outer == 1) return x.reshape(out_shape);
  if (!x.is_host()) return swap_outer_and_parts(x, a.outer, n, a.d / n * a.inner, out_shape);
  Tensor out = Tensor::empty(out_shape, x.dtype());
  const size_t block = static_cast<size_t>(a.d / n * a.inner) * dtype_size(x.dtype());  // one part of one outer row
  const auto* src = static_cast<const char*>(x.raw());
  auto* dst = static_cast<char*>(out.raw());
  for (int r = 0; r < n; ++r)
    for (int64_t o = 0; o < a.outer; ++o)
      std::memcpy(dst + (r * a.outer + o) * block, src + (o * n + r) * block, block);
  return out;
}

Tensor merge_front_into_dim(const Tensor& y, int dim) {
  require_defined("merge_front_into_dim", y);
  const int n = static_cast<int>(y.dim(0));
  Shape out_shape(y.shape().begin() + 1, y.shape().end());
  const Around a = around(out_shape, dim);
  out_shape[dim] *= n;
  if (a.outer == 1) return y.reshape(out_shape);
  if (!y.is_host()) return swap_outer_and_parts(y, n, a.outer, a.d * a.inner, out_shape);
  Tensor out = Tensor::empty(out_shape, y.dtype());
  const size_t block = static_cast<size_t>(a.d * a.inner) * dtype_size(y.dtype());
  const auto* src = static_cast<const char*>(y.raw());
  auto* dst = static_cast<char*>(out.raw());
  for (int r = 0; r < n; ++r)
    for (int64_t o = 0; o < a.outer; ++o)
      std::memcpy(dst + (o * n + r) * block, src + (r * a.outer + o) * block, block);
  return out;
}

void add_into(Tensor& y, const Tensor& x) {
  if (!x.defined() || !y.defined() || x.device() != y.device() || x.shape() != y.shape() || x.dtype() != y.dtype())
    throw RuntimeError(cat("add_into: x ", shape_string(x.shape()), " ", dtype_name(x.dtype()), " and y ",
                           shape_string(y.shape()), " ", dtype_name(y.dtype()),
                           " must be tensors alike on one device"));
  if (!y.is_host()) return SEXTANT_CUDA_CALL(ops::cuda::add_into(y, x));  // the same sum, rounded once
  with_compute_type(y.dtype(), [&](auto tag) {
    using F = decltype(tag);
    Tensor sum = widened<F>(y);
    const Tensor in = widened<F>(x);
    F* a = sum.data<F>();
    const F* b = in.data<F>();
    for (int64_t i = 0, n = sum.numel(); i < n; ++i) a[i] += b[i];
    store_rounded(y, sum);
  });
}

}  // namespace sextant::tp
