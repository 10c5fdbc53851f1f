// The attention block on CUDA cores, every product in f32: the path for f32
// storage (tensor cores would mean TF32, whose 10-bit mantissa is far from
// the f32 tolerance), and for 16-bit heads wider than the tensor-core kernels
// take. Written for clarity over speed: f32 attention is a conformance
// configuration, bf16 / f16 at d <= 128 take attention_mma.cu.
//
// Forward: one warp per (batch, head, query row). Keys go 32 at a time, one
// per lane: the lane computes its score (the query row sits in shared
// memory), the warp takes the chunk's max and sum (online softmax, as the
// host op), and then every lane accumulates its output columns (lane,
// lane + 32, ...) over the chunk's keys. A chunk whose keys are all masked
// is skipped.
//
// Backward: the same walk with the final LSE. dQ of the row is the warp's
// own; dK and dV rows are shared by every query row (and, with GQA, every
// query head of the group), so they are added with atomics.
#include "kernels/ops/cuda/attention_common.cuh"

namespace sextant::ops::cuda::attention {

namespace {

constexpr int kWarps = 4;
constexpr int kCols = kSimtMaxHeadDim / 32;  // output columns per lane

// An input element in f32, as the host op reads it (f64 storage rounded to f32 first).
template <class T>
__device__ __forceinline__ float f32(T x) {
  return static_cast<float>(widen(x));
}

template <class T>
__global__ void __launch_bounds__(kWarps * 32)
    forward_kernel(const T* q, const T* k, const T* v, float* out, float* lse, Sizes s, MaskRuns mask) {
  __shared__ float q_rows[kWarps][kSimtMaxHeadDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;  // over [b, hq, sq]
  if (row >= static_cast<int64_t>(s.b) * s.hq * s.sq) return;
  const int i = static_cast<int>(row % s.sq), h = static_cast<int>((row / s.sq) % s.hq);
  const int bi = static_cast<int>(row / (static_cast<int64_t>(s.sq) * s.hq)), kvh = h / s.group;
  const int64_t q_at = ((static_cast<int64_t>(bi) * s.sq + i) * s.hq + h) * s.d;
  const int64_t o_at = ((static_cast<int64_t>(bi) * s.sq + i) * s.hq + h) * s.dv;
  float* qs = q_rows[warp];
  for (int c = lane; c < s.d; c += 32) qs[c] = f32(q[q_at + c]);
  __syncwarp();
  const Window window = query_window(mask, i, s.sq);
  float m = -INFINITY, l = 0, o[kCols] = {};
  for (int j0 = 0; j0 < s.sk; j0 += kSimtChunk) {
    const int j = j0 + lane;
    const bool visible = in_window(key_position(mask, j, s.sk), window);
    if (!__any_sync(0xffffffffu, visible)) continue;
    float score = -INFINITY;
    if (visible) {
      const T* kr = k + ((static_cast<int64_t>(bi) * s.sk + j) * s.hk + kvh) * s.d;
      float dot = 0;
      for (int c = 0; c < s.d; ++c) dot += qs[c] * f32(kr[c]);
      score = dot * s.scale;
    }
    const float m_new = fmaxf(m, warp_max(score));
    const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
    const float p = visible ? expf(score - m_new) : 0.0f;
    l = l * alpha + warp_sum(p);
    for (int x = 0; x < kCols; ++x) o[x] *= alpha;
    for (int jj = 0; jj < kSimtChunk; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p, jj);
      if (pj == 0.0f) continue;  // the same on every lane: masked or underflowed
      const T* vr = v + ((static_cast<int64_t>(bi) * s.sk + j0 + jj) * s.hk + kvh) * s.dv;
      for (int x = 0; x < kCols; ++x)
        if (lane + 32 * x < s.dv) o[x] += pj * f32(vr[lane + 32 * x]);
    }
    m = m_new;
  }
  for (int x = 0; x < kCols; ++x)
    if (lane + 32 * x < s.dv) out[o_at + lane + 32 * x] = l > 0.0f ? o[x] / l : 0.0f;
  if (lane == 0) lse[(static_cast<int64_t>(bi) * s.hq + h) * s.sq + i] = l > 0.0f ? m + logf(l) : -INFINITY;
}

template <class T>
__global__ void __launch_bounds__(kWarps * 32)
    backward_kernel(const T* q, const T* k, const T* v, const T* dout, const float* lse, const float* delta, float* dq,
                    float* dk, float* dv, Sizes s, MaskRuns mask) {
  __shared__ float q_rows[kWarps][kSimtMaxHeadDim], do_rows[kWarps][kSimtMaxHeadDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (row >= static_cast<int64_t>(s.b) * s.hq * s.sq) return;
  const int i = static_cast<int>(row % s.sq), h = static_cast<int>((row / s.sq) % s.hq);
  const int bi = static_cast<int>(row / (static_cast<int64_t>(s.sq) * s.hq)), kvh = h / s.group;
  const int64_t stat = (static_cast<int64_t>(bi) * s.hq + h) * s.sq + i;
  const float row_lse = lse[stat], row_delta = delta[stat];
  if (row_lse == -INFINITY) return;  // the row saw no key: P = 0, nothing to add
  const int64_t q_at = ((static_cast<int64_t>(bi) * s.sq + i) * s.hq + h) * s.d;
  const int64_t o_at = ((static_cast<int64_t>(bi) * s.sq + i) * s.hq + h) * s.dv;
  float *qs = q_rows[warp], *dos = do_rows[warp];
  for (int c = lane; c < s.d; c += 32) qs[c] = f32(q[q_at + c]);
  for (int c = lane; c < s.dv; c += 32) dos[c] = f32(dout[o_at + c]);
  __syncwarp();
  const Window window = query_window(mask, i, s.sq);
  float dq_acc[kCols] = {};
  for (int j0 = 0; j0 < s.sk; j0 += kSimtChunk) {
    const int j = j0 + lane;
    const bool visible = in_window(key_position(mask, j, s.sk), window);
    if (!__any_sync(0xffffffffu, visible)) continue;
    float p = 0, ds = 0;
    if (visible) {  // P = exp(scale q.k - LSE), dP = dO.v, dS = P (dP - D)
      const int64_t k_at = ((static_cast<int64_t>(bi) * s.sk + j) * s.hk + kvh) * s.d;
      const int64_t v_at = ((static_cast<int64_t>(bi) * s.sk + j) * s.hk + kvh) * s.dv;
      float qk = 0, dp = 0;
      for (int c = 0; c < s.d; ++c) qk += qs[c] * f32(k[k_at + c]);
      for (int c = 0; c < s.dv; ++c) dp += dos[c] * f32(v[v_at + c]);
      p = expf(qk * s.scale - row_lse);
      ds = p * (dp - row_delta);
    }
    for (int jj = 0; jj < kSimtChunk; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p, jj), dsj = __shfl_sync(0xffffffffu, ds, jj);
      if (pj == 0.0f && dsj == 0.0f) continue;  // uniform over the warp
      const int64_t k_at = ((static_cast<int64_t>(bi) * s.sk + j0 + jj) * s.hk + kvh) * s.d;
      const int64_t v_at = ((static_cast<int64_t>(bi) * s.sk + j0 + jj) * s.hk + kvh) * s.dv;
      for (int x = 0; x < kCols; ++x) {
        const int c = lane + 32 * x;
        if (c < s.d) {
          dq_acc[x] += dsj * f32(k[k_at + c]);              // dQ += scale dS K
          atomicAdd(dk + k_at + c, s.scale * dsj * qs[c]);  // dK += scale dS^T Q
        }
        if (c < s.dv) atomicAdd(dv + v_at + c, pj * dos[c]);  // dV += P^T dO
      }
    }
  }
  for (int x = 0; x < kCols; ++x)
    if (lane + 32 * x < s.d) dq[q_at + lane + 32 * x] += s.scale * dq_acc[x];
}

unsigned blocks_for(const Sizes& s) {
  const int64_t rows = static_cast<int64_t>(s.b) * s.hq * s.sq;
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  if (blocks > 0x7fffffff) throw RuntimeError(cat("attention on CUDA: ", rows, " query rows exceed the grid"));
  return static_cast<unsigned>(blocks);
}

void require_head_dims(const Sizes& s) {
  for (int d : {s.d, s.dv})
    if (d > kSimtMaxHeadDim) throw RuntimeError(cat("attention on CUDA: head_dim ", d, " exceeds ", kSimtMaxHeadDim));
}

}  // namespace

void forward_simt(DType dtype, const ForwardArgs& a) {
  require_head_dims(a.sizes);
  if (static_cast<int64_t>(a.sizes.b) * a.sizes.hq * a.sizes.sq == 0) return;
  with_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T><<<blocks_for(a.sizes), kWarps * 32, 0, compute_stream()>>>(
        static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v), a.out, a.lse, a.sizes,
        a.mask);
  });
  SEXTANT_CHECK_LAUNCH("attention forward (CUDA cores)");
}

void backward_simt(DType dtype, const BackwardArgs& a) {
  require_head_dims(a.sizes);
  if (static_cast<int64_t>(a.sizes.b) * a.sizes.hq * a.sizes.sq == 0) return;
  with_storage(dtype, [&](auto tag) {
    using T = decltype(tag);
    backward_kernel<T><<<blocks_for(a.sizes), kWarps * 32, 0, compute_stream()>>>(
        static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
        static_cast<const T*>(a.dout), a.lse, a.delta, a.dq, a.dk, a.dv, a.sizes, a.mask);
  });
  SEXTANT_CHECK_LAUNCH("attention backward (CUDA cores)");
}

}  // namespace sextant::ops::cuda::attention
