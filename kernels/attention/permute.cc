#include "kernels/attention/permute.h"

#include <cstring>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"

namespace sextant::cp {

void add_into(Tensor& acc, const Tensor& x) {
  if (!acc.is_host()) return SEXTANT_CUDA_CALL(ops::cuda::add_into(acc, x));
  float* a = acc.data<float>();
  const float* b = x.data<float>();
  for (int64_t i = 0; i < acc.numel(); ++i) a[i] += b[i];
}

Tensor permute_rows(const Tensor& x, const Shape& view, const std::vector<int>& order) {
  const int nd = static_cast<int>(view.size());
  if (!x.defined() || numel_of(view) != x.numel() || static_cast<int>(order.size()) != nd || nd < 1 ||
      order.back() != nd - 1)
    throw RuntimeError(cat("permute_rows: cannot view ", shape_string(x.shape()), " as ", shape_string(view),
                           " and move its dims keeping the last one last"));
  // Element strides of the view, and the output shape.
  std::vector<int64_t> stride(nd, 1);
  for (int i = nd - 2; i >= 0; --i) stride[i] = stride[i + 1] * view[i + 1];
  Shape shape(nd);
  for (int i = 0; i < nd; ++i) shape[i] = view[order[i]];
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  if (!x.is_host()) {  // one thread per element, the same order (kernels/ops/cuda/elementwise.cu)
    SEXTANT_CUDA_CALL(ops::cuda::permute_rows(x, view, order, out));
    return out;
  }
  const size_t elem = dtype_size(x.dtype());
  const size_t row_bytes = static_cast<size_t>(view.back()) * elem;
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(out.raw());
  // Walk the output rows in order with an odometer over its leading dims.
  std::vector<int64_t> index(nd - 1, 0);
  const int64_t rows = view.back() ? out.numel() / view.back() : 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = 0;
    for (int i = 0; i < nd - 1; ++i) offset += index[i] * stride[order[i]];
    std::memcpy(dst + r * row_bytes, src + offset * elem, row_bytes);
    for (int i = nd - 2; i >= 0; --i) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

}  // namespace sextant::cp
