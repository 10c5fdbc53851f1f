#include "kernels/ops/random.h"

#include "kernels/ops/device_dispatch.h"

namespace sextant::ops {

Tensor random_block(const Shape& global, const Shape& offset, const Shape& local, DType dtype, const RandomSpec& spec,
                    Device device) {
  if (device == Device::host) return sextant::random_block(global, offset, local, dtype, spec);
  Tensor out = Tensor::empty(local, dtype, device);
  SEXTANT_CUDA_CALL(cuda::random_fill(out, global, offset, spec));
  return out;
}

Tensor random_tensor(const Shape& shape, DType dtype, const RandomSpec& spec, Device device) {
  return random_block(shape, Shape(shape.size(), 0), shape, dtype, spec, device);
}

}  // namespace sextant::ops
