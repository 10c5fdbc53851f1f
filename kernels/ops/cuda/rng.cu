// The deterministic input generator of harness/rng.h on the GPU: element i
// of a block gets the value random_value(spec, global index of i), computed
// with the same counter hash (splitmix64's finalizer) in the same double
// arithmetic, then rounded to the dtype as the host rounds it (double ->
// float -> 16-bit, each to nearest even).
//
// Uniform values are bit-identical to the host's. Normal values go through
// log1p and cos, whose CUDA double versions may differ from glibc's in the
// last bit of the double; after rounding to f32 / bf16 / f16 they agree
// except when a value lies within that bit of a rounding boundary.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/ops/cuda/cuda_common.h"
#include "kernels/ops/cuda_ops.h"

namespace sextant::ops::cuda {

namespace {

constexpr int kMaxDims = 8;

// Where a block sits in its global tensor: local extents and the global
// strides, innermost last; base is the global flat index of its first element.
struct BlockLayout {
  int ndim = 0;
  int64_t local[kMaxDims] = {};
  int64_t global_stride[kMaxDims] = {};
  int64_t base = 0;
};

struct Spec {
  uint64_t seed, tensor;
  double scale;
  bool normal;
};

// The host's mix (harness/rng.cc), bit for bit.
__device__ uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ uint64_t random_bits(uint64_t seed, uint64_t tensor, uint64_t index, uint64_t stream) {
  return mix(mix(mix(mix(seed) ^ tensor) ^ index) ^ stream);
}

__device__ double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// random_value(spec, index). Explicit _rn operations: no fused multiply-add
// may change a rounding the host does separately.
__device__ double random_value(const Spec& s, uint64_t index) {
  if (!s.normal) {
    double u = unit(random_bits(s.seed, s.tensor, index, 0));
    return __dmul_rn(s.scale, __dadd_rn(__dmul_rn(2.0, u), -1.0));
  }
  double u1 = unit(random_bits(s.seed, s.tensor, index, 1));
  double u2 = unit(random_bits(s.seed, s.tensor, index, 2));
  double radius = sqrt(__dmul_rn(-2.0, log1p(-u1)));
  constexpr double kTwoPi = 2.0 * 3.14159265358979323846;  // = 2.0 * std::numbers::pi, exactly
  return __dmul_rn(__dmul_rn(s.scale, radius), cos(__dmul_rn(kTwoPi, u2)));
}

// Stores v rounded as the host's from_double<T> does (16-bit types through float).
__device__ void store(double* p, double v) { *p = v; }
__device__ void store(float* p, double v) { *p = __double2float_rn(v); }
__device__ void store(__nv_bfloat16* p, double v) { *p = __float2bfloat16_rn(__double2float_rn(v)); }
__device__ void store(__half* p, double v) { *p = __float2half_rn(__double2float_rn(v)); }

// out[i] for every local flat index i (grid-stride loop).
template <class T>
__global__ void fill_block(T* out, int64_t count, BlockLayout layout, Spec spec) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, global = layout.base;
    for (int d = layout.ndim - 1; d >= 0; --d) {
      global += (rest % layout.local[d]) * layout.global_stride[d];
      rest /= layout.local[d];
    }
    store(out + i, random_value(spec, static_cast<uint64_t>(global)));
  }
}

template <class T>
void launch(Tensor& out, int64_t count, const BlockLayout& layout, const Spec& spec) {
  const int threads = 256;
  const int64_t wanted = (count + threads - 1) / threads;
  const int blocks = static_cast<int>(wanted < 65535 * 8 ? wanted : 65535 * 8);
  fill_block<T><<<blocks, threads, 0, compute_stream()>>>(static_cast<T*>(out.raw()), count, layout, spec);
  SEXTANT_CHECK_LAUNCH("random_fill");
}

BlockLayout layout_of(const Shape& global, const Shape& offset, const Shape& local) {
  const size_t n = global.size();
  if (offset.size() != n || local.size() != n)
    throw RuntimeError("random_fill: global, offset and local shapes differ in rank");
  if (n > static_cast<size_t>(kMaxDims)) throw RuntimeError(cat("random_fill: at most ", kMaxDims, " dimensions"));
  BlockLayout layout;
  layout.ndim = static_cast<int>(n);
  int64_t stride = 1;
  for (int d = static_cast<int>(n) - 1; d >= 0; --d) {
    if (offset[d] < 0 || local[d] < 0 || offset[d] + local[d] > global[d])
      throw RuntimeError(cat("random_fill: block ", shape_string(local), " at ", shape_string(offset), " outside ",
                             shape_string(global)));
    layout.local[d] = local[d];
    layout.global_stride[d] = stride;
    layout.base += offset[d] * stride;
    stride *= global[d];
  }
  return layout;
}

}  // namespace

void random_fill(Tensor& out, const Shape& global, const Shape& offset, const RandomSpec& spec) {
  if (out.is_host()) throw RuntimeError("cuda::random_fill needs a device tensor");
  BlockLayout layout = layout_of(global, offset, out.shape());
  const int64_t count = out.numel();
  if (count == 0) return;
  Spec s{spec.seed, spec.tensor, spec.scale, spec.distribution == Distribution::normal};
  switch (out.dtype()) {
    case DType::f64: return launch<double>(out, count, layout, s);
    case DType::f32: return launch<float>(out, count, layout, s);
    case DType::bf16: return launch<__nv_bfloat16>(out, count, layout, s);
    case DType::f16: return launch<__half>(out, count, layout, s);
  }
}

}  // namespace sextant::ops::cuda
