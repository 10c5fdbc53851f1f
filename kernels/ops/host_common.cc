#include "kernels/ops/host_common.h"

#include <bit>
#include <cstdint>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/simd.h"

namespace sextant::ops {

Device require_one_device(std::string_view op, std::initializer_list<NamedTensor> tensors) {
  const NamedTensor* first = nullptr;
  for (const NamedTensor& t : tensors) {
    if (!t.tensor->defined()) throw RuntimeError(cat(op, ": ", t.name, " is an undefined tensor"));
    if (!first) first = &t;
    if (t.tensor->device() != first->tensor->device())
      throw RuntimeError(cat(op, ": ", t.name, " is on ", device_name(t.tensor->device()), " but ", first->name,
                             " is on ", device_name(first->tensor->device())));
  }
  return first ? first->tensor->device() : Device::host;
}

void require_shape(std::string_view op, const char* name, const Tensor& t, const Shape& expected) {
  if (t.shape() != expected)
    throw RuntimeError(cat(op, ": ", name, " ", shape_string(t.shape()), " must be ", shape_string(expected)));
}

void require_rows(std::string_view op, const char* name, const Tensor& t) {
  if (t.ndim() < 1) throw RuntimeError(cat(op, ": ", name, " must have at least one dimension"));
}

int64_t rows_of(const Tensor& t) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < t.ndim(); ++d) rows *= t.shape()[d];
  return rows;
}

namespace {
// The harness's float_to_bf16_bits, inline so that the loop vectorizes.
inline uint16_t round_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // ties to even
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
}  // namespace

Tensor converted(const Tensor& t, DType dtype) {
  const int64_t n = t.numel();
  if (t.dtype() == DType::bf16 && dtype == DType::f32) {
    Tensor out = Tensor::empty(t.shape(), DType::f32);
    const uint16_t* src = static_cast<const uint16_t*>(t.raw());
    float* dst = out.data<float>();
    run_simd([&](auto) SEXTANT_INLINE_LAMBDA {
      for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<uint32_t>(src[i]) << 16);
    });
    return out;
  }
  if (t.dtype() == DType::f32 && dtype == DType::bf16) {
    Tensor out = Tensor::empty(t.shape(), DType::bf16);
    const float* src = t.data<float>();
    uint16_t* dst = static_cast<uint16_t*>(out.raw());
    run_simd([&](auto) SEXTANT_INLINE_LAMBDA {
      for (int64_t i = 0; i < n; ++i) dst[i] = round_to_bf16(src[i]);
    });
    return out;
  }
  return t.to(dtype);
}

DType compute_dtype(DType storage) { return storage == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace sextant::ops
