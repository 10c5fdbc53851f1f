// The MoE token row movements on the GPU (kernels/moe/permute.h): a gather of
// (optionally scaled) rows, the deterministic weighted combine of a token's
// rows, and the per-row dot products behind dLoss/dprob.
//
// The combine is a gather, not an atomic scatter-add: the host builds, per
// token, the list of its rows in the order the host op adds them, and one
// thread per output element sums that list in order with the products and
// sums rounded separately (__fmul_rn, __fadd_rn), so the result is the host
// loop's, bit for bit, and never depends on scheduling. The routing decisions
// that make the lists (top-k, capacity) stay on the host (router.cc says why).
#include "kernels/ops/cuda/device_common.cuh"
#include "kernels/ops/cuda_ops.h"

namespace sextant::ops::cuda {

namespace {

constexpr int kThreads = 256;

// out[r] = scale[r] * x[src[r]] (f32 product, rounded once), or a plain copy.
template <class T>
__global__ void gather_scaled_rows_kernel(const T* x, const int64_t* src, const float* scale, T* out, int64_t rows,
                                          int64_t h) {
  for (int64_t i = global_thread(); i < rows * h; i += grid_threads()) {
    const int64_t r = i / h;
    const T v = x[src[r] * h + i % h];
    out[i] = scale ? narrow_to<T>(__fmul_rn(scale[r], static_cast<float>(widen(v)))) : v;
  }
}

// out[t] = sum over j in [offsets[t], offsets[t + 1]) of scale[ids[j]] * rows[ids[j]], in j order.
template <class T>
__global__ void combine_rows_kernel(const T* rows, const int64_t* offsets, const int64_t* ids, const float* scale,
                                    T* out, int64_t tokens, int64_t h) {
  for (int64_t i = global_thread(); i < tokens * h; i += grid_threads()) {
    const int64_t t = i / h, c = i % h;
    float acc = 0.0f;
    for (int64_t j = offsets[t]; j < offsets[t + 1]; ++j) {
      const int64_t r = ids[j];
      const float w = scale ? scale[r] : 1.0f;
      acc = __fadd_rn(acc, __fmul_rn(w, static_cast<float>(widen(rows[r * h + c]))));
    }
    out[i] = narrow_to<T>(acc);
  }
}

// dots[r] = <a[a_rows[r]], b[r]> in f32, one warp per row.
template <class T>
__global__ void row_dots_kernel(const T* a, const int64_t* a_rows, const T* b, float* dots, int64_t rows, int64_t h) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x % 32;
  for (int64_t r = global_thread() / 32; r < rows; r += warps) {
    const T *ar = a + a_rows[r] * h, *br = b + r * h;
    float sum = 0.0f;
    for (int64_t c = lane; c < h; c += 32) sum += static_cast<float>(widen(ar[c])) * static_cast<float>(widen(br[c]));
    sum = warp_sum(sum);
    if (lane == 0) dots[r] = sum;
  }
}

const float* scale_ptr(const Tensor& scale) { return scale.defined() ? ptr<float>(scale) : nullptr; }

}  // namespace

void moe_gather_rows(const Tensor& x, std::span<const int64_t> src, const Tensor& scale, Tensor& out) {
  require_dtype("moe_gather_rows", "out", out, x.dtype());
  const int64_t rows = static_cast<int64_t>(src.size()), h = x.dim(1);
  if (rows * h == 0) return;
  const DeviceIds device_src(src);
  with_storage(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    gather_scaled_rows_kernel<T><<<grid_for(rows * h, kThreads), kThreads, 0, compute_stream()>>>(
        ptr<T>(x), device_src.get(), scale_ptr(scale), ptr<T>(out), rows, h);
    SEXTANT_CHECK_LAUNCH("moe_gather_rows");
  });
}

void moe_combine_rows(const Tensor& rows, std::span<const int64_t> offsets, std::span<const int64_t> ids,
                      const Tensor& scale, Tensor& out) {
  require_dtype("moe_combine_rows", "out", out, rows.dtype());
  const int64_t tokens = out.dim(0), h = out.dim(1);
  if (tokens * h == 0) return;
  const DeviceIds device_offsets(offsets);
  const DeviceIds device_ids(ids);
  with_storage(rows.dtype(), [&](auto tag) {
    using T = decltype(tag);
    combine_rows_kernel<T><<<grid_for(tokens * h, kThreads), kThreads, 0, compute_stream()>>>(
        ptr<T>(rows), device_offsets.get(), device_ids.get(), scale_ptr(scale), ptr<T>(out), tokens, h);
    SEXTANT_CHECK_LAUNCH("moe_combine_rows");
  });
}

void moe_row_dots(const Tensor& a, std::span<const int64_t> a_rows, const Tensor& b, Tensor& dots) {
  require_dtype("moe_row_dots", "b", b, a.dtype());
  const int64_t rows = static_cast<int64_t>(a_rows.size()), h = b.dim(1);
  if (rows == 0) return;
  const DeviceIds device_rows(a_rows);
  with_storage(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    row_dots_kernel<T><<<grid_for(rows * 32, kThreads), kThreads, 0, compute_stream()>>>(
        ptr<T>(a), device_rows.get(), ptr<T>(b), ptr<float>(dots), rows, h);
    SEXTANT_CHECK_LAUNCH("moe_row_dots");
  });
}

}  // namespace sextant::ops::cuda
