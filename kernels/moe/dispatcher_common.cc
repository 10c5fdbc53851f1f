#include "kernels/moe/dispatcher_common.h"

#include "harness/error.h"
#include "kernels/ops/device_dispatch.h"

namespace sextant::moe {

namespace {

// sum_blocks on the device: the same f32 sums in block order (add_into rounds each to f32, as the host loop).
Tensor sum_blocks_on_device(const Tensor& parts, int n) {
  const int64_t rows = parts.dim(0) / n;
  Tensor acc = Tensor::zeros({rows, parts.dim(1)}, DType::f32, parts.device());
  for (int b = 0; b < n; ++b) {
    const Tensor block = narrow(parts, 0, b * rows, rows);
    SEXTANT_CUDA_CALL(ops::cuda::add_into(acc, block.dtype() == DType::f32 ? block : block.to(DType::f32)));
  }
  return parts.dtype() == DType::f32 ? acc : acc.to(parts.dtype());
}

}  // namespace

void move_one_row_to_neighbour(std::vector<int64_t>& count, int ranks, int local) {
  for (int d = 0; d + 1 < ranks; ++d)
    for (int l = local - 1; l >= 0; --l)
      if (count[d * local + l] > 0) {
        --count[d * local + l];
        ++count[(d + 1) * local];
        return;
      }
}

Tensor sum_blocks(const Tensor& parts, int n) {
  if (!parts.is_host()) return sum_blocks_on_device(parts, n);
  const int64_t rows = parts.dim(0) / n, h = parts.dim(1), block = rows * h;
  Tensor acc = Tensor::zeros({rows, h}, DType::f32);
  float* out = acc.data<float>();
  dispatch(parts.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = parts.data<T>();
    for (int b = 0; b < n; ++b)
      for (int64_t i = 0; i < block; ++i) out[i] += static_cast<float>(to_float(in[b * block + i]));
  });
  return parts.dtype() == DType::f32 ? acc : acc.to(parts.dtype());
}

}  // namespace sextant::moe
