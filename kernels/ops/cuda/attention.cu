// Our attention block's CUDA entry points (cuda_ops.h): the mask as position
// runs, the choice of kernel, the work count, and the small kernels of the
// block's bookkeeping (attention delta, LSE merge at a row offset, adding a
// piece's gradients into rows of the accumulators), which cuDNN's path
// (attention_cudnn.cc) uses too.
//
// Kernel choice: bf16 / f16 storage with head_dim <= 128 (q, k and v alike) on a GPU of compute
// capability 8.0+ takes the tensor-core kernels (attention_mma.cu, which says
// what they are for beside cuDNN's); f32 (true f32 math, as the f32
// tolerance assumes), f64 (read as f32, as the host op reads it) and wider
// heads take the CUDA-core kernels (attention_simt.cu).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops/cuda/attention_common.cuh"
#include "kernels/ops/cuda_ops.h"

namespace sextant::ops::cuda {

namespace {

using attention::kMaxRuns;
using attention::MaskRuns;
using attention::PositionRuns;
using attention::Sizes;

// Runs of consecutive positions within one sequence (seq: empty unless packed).
PositionRuns runs_of(const std::vector<int64_t>& pos, const std::vector<int64_t>& seq, const char* which) {
  constexpr int64_t kLimit = int64_t{1} << 30;  // positions and row indices stay far from int overflow
  PositionRuns runs;
  for (size_t i = 0; i < pos.size(); ++i) {
    const int64_t name = seq.empty() ? 0 : seq[i];
    if (pos[i] < -kLimit || pos[i] > kLimit || static_cast<int64_t>(i) > kLimit || name < -1 || name > kLimit)
      throw RuntimeError(cat("attention on CUDA: ", which, " position ", pos[i], " (sequence ", name, ") of row ", i,
                             " is out of range"));
    if (i > 0 && pos[i] == pos[i - 1] + 1 && (seq.empty() || seq[i] == seq[i - 1])) continue;
    if (runs.count == kMaxRuns)
      throw RuntimeError(
          cat("attention on CUDA: the ", which, " positions form more than ", kMaxRuns, " runs of consecutive rows"));
    runs.start[runs.count] = static_cast<int>(i);
    runs.pos[runs.count] = static_cast<int>(pos[i]);
    runs.seq[runs.count] = name == AttentionMask::kPaddingRow ? attention::kPaddingRun : static_cast<int>(name);
    ++runs.count;
  }
  return runs;
}

MaskRuns mask_runs(const AttentionMask& mask) {
  MaskRuns m;
  m.causal = mask.causal ? 1 : 0;
  m.positional = mask.positional() ? 1 : 0;
  m.packed = mask.packed() ? 1 : 0;
  // Below 2^30, as the positions: pos + right stays within an int.
  for (int64_t side : {mask.window.left, mask.window.right})
    if (side >= (int64_t{1} << 30))
      throw RuntimeError(cat("attention on CUDA: window side ", side, " is out of range"));
  m.window_left = static_cast<int>(mask.window.left);
  m.window_right = static_cast<int>(mask.window.right);
  if (mask.positional()) m.q = runs_of(mask.q_pos, mask.q_seq, "query"), m.k = runs_of(mask.k_pos, mask.k_seq, "key");
  return m;
}

Sizes sizes_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  for (int64_t x : {q.dim(0), q.dim(1), q.dim(2), q.dim(3), k.dim(1), k.dim(2), v.dim(3)})
    if (x > 0x7fffffff) throw RuntimeError(cat("attention on CUDA: dimension ", x, " exceeds int"));
  Sizes s;
  s.b = static_cast<int>(q.dim(0)), s.sq = static_cast<int>(q.dim(1)), s.hq = static_cast<int>(q.dim(2));
  s.d = static_cast<int>(q.dim(3)), s.sk = static_cast<int>(k.dim(1)), s.hk = static_cast<int>(k.dim(2));
  s.dv = static_cast<int>(v.dim(3));
  s.group = s.hk > 0 ? s.hq / s.hk : 1;
  s.scale = attention_scale(s.d, s.dv);  // as the host op
  return s;
}

bool uses_tensor_cores(DType dtype, const Sizes& s) {
  return (dtype == DType::bf16 || dtype == DType::f16) && s.d == s.dv && attention::mma_supported(s.d);
}

// Score entries a kernel computes: the entries of every (tq x tk) tile the
// mask does not hide completely, per (batch, head); the host side of
// tile_hidden (attention_common.cuh).
int64_t tile_scores(const AttentionMask& mask, int64_t sq, int64_t sk, int64_t tq, int64_t tk) {
  if (!mask.positional()) return sq * sk;
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  const bool packed = mask.packed();
  auto padding = [](const std::vector<int64_t>& seq, int64_t i) {
    return !seq.empty() && seq[i] == AttentionMask::kPaddingRow;
  };
  struct Range {
    int64_t lo = kNone, hi = -kNone;
  };
  std::vector<Range> keys;  // per key tile: lowest and highest real key position
  for (int64_t k0 = 0; k0 < sk; k0 += tk) {
    Range r;
    for (int64_t j = k0; j < std::min(sk, k0 + tk); ++j)
      if (!padding(mask.k_seq, j)) r.lo = std::min(r.lo, mask.k_pos[j]), r.hi = std::max(r.hi, mask.k_pos[j]);
    keys.push_back(r);
  }
  int64_t scores = 0;
  for (int64_t q0 = 0; q0 < sq; q0 += tq) {
    const int64_t q1 = std::min(sq, q0 + tq);
    Range window;  // lowest window start, highest window end of the real queries
    int64_t lowest = kNone;
    for (int64_t i = q0; i < q1; ++i)
      if (!padding(mask.q_seq, i))
        window.lo = std::min(window.lo, packed ? mask.q_seq[i] : -kNone),
        window.hi = std::max(window.hi, mask.last_key(mask.q_pos[i])), lowest = std::min(lowest, mask.q_pos[i]);
    if (mask.window.left != kNoWindow && lowest != kNone) window.lo = std::max(window.lo, mask.first_key(lowest));
    for (size_t t = 0; t < keys.size(); ++t) {
      const bool hidden =
          window.lo > window.hi || keys[t].lo > keys[t].hi || keys[t].lo > window.hi || keys[t].hi < window.lo;
      if (!hidden)
        scores += (q1 - q0) * (std::min(sk, static_cast<int64_t>(t + 1) * tk) - static_cast<int64_t>(t) * tk);
    }
  }
  return scores;
}

int64_t scores_of(bool tensor_cores, const AttentionMask& mask, const Sizes& s) {
  const int64_t per_head = tensor_cores ? tile_scores(mask, s.sq, s.sk, attention::kMmaTile, attention::kMmaTile)
                                        : tile_scores(mask, s.sq, s.sk, 1, attention::kSimtChunk);
  return static_cast<int64_t>(s.b) * s.hq * per_head;
}

void require_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  require_dtype(op, "k", k, q.dtype());
  require_dtype(op, "v", v, q.dtype());
}

// delta[b, h, i] = sum_x out[b, i, h, x] dout[b, i, h, x]: one warp per row.
template <class O, class G>
__global__ void delta_kernel(const O* out, const G* dout, float* delta, int64_t b, int64_t s, int64_t h, int64_t d) {
  const int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;  // over [b, s, h]
  const int lane = threadIdx.x & 31;
  if (row >= b * s * h) return;
  float sum = 0;
  for (int64_t x = lane; x < d; x += 32)
    sum += static_cast<float>(widen(out[row * d + x])) * static_cast<float>(widen(dout[row * d + x]));
  sum = warp_sum(sum);
  const int64_t hh = row % h, i = (row / h) % s, bi = row / (h * s);
  if (lane == 0) delta[(bi * h + hh) * s + i] = sum;
}

// attention_block.cc's merge, one warp per (b, h, i) row of the partial
// result, which holds rows [row0, row0 + s_b) of the accumulator's s_out.
//   out: [b, s_out, h, d] f32, lse: [b, h, s_out];  out_b: [b, s_b, h, d] (B), lse_b: [b, h, s_b]
template <class B>
__global__ void merge_kernel(float* out, float* lse, int64_t s_out, int64_t row0, const B* out_b, const float* lse_b,
                             int64_t b, int64_t s_b, int64_t h, int64_t d) {
  const int64_t stat = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;  // over [b, h, s_b]
  const int lane = threadIdx.x & 31;
  if (stat >= b * h * s_b) return;
  const int64_t i = stat % s_b, hh = (stat / s_b) % h, bi = stat / (s_b * h);
  const int64_t row = ((bi * s_out + row0 + i) * h + hh) * d, row_b = ((bi * s_b + i) * h + hh) * d;
  const int64_t at = (bi * h + hh) * s_out + row0 + i;
  const float la = lse[at], lb = lse_b[stat];
  __syncwarp();                 // every lane has read the old lse before lane 0 writes the new one
  if (lb == -INFINITY) return;  // b saw nothing: keep a (also when both are empty)
  if (la == -INFINITY) {        // a saw nothing: take b
    for (int64_t x = lane; x < d; x += 32) out[row + x] = widen(out_b[row_b + x]);
    if (lane == 0) lse[at] = lb;
    return;
  }
  const float diff = lb - la;
  const float wb = diff >= 0 ? 1.0f / (1.0f + expf(-diff)) : expf(diff) / (1.0f + expf(diff));
  for (int64_t x = lane; x < d; x += 32) out[row + x] += wb * (widen(out_b[row_b + x]) - out[row + x]);
  const float hi = fmaxf(la, lb), lo = fminf(la, lb);
  if (lane == 0) lse[at] = hi + log1pf(expf(lo - hi));
}

// acc[bi, row0 + i, ...] += x[bi, i, ...]: acc [b, s_acc, inner] f32, x [b, s_x, inner].
template <class X>
__global__ void add_rows_kernel(float* acc, int64_t s_acc, int64_t row0, const X* x, int64_t b, int64_t s_x,
                                int64_t inner) {
  const int64_t n = b * s_x * inner;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t rest = e % (s_x * inner), bi = e / (s_x * inner);
    acc[bi * s_acc * inner + row0 * inner + rest] += widen(x[e]);
  }
}

unsigned grid_blocks(int64_t n, int threads) {
  return static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, 65536));
}

unsigned warp_blocks(int64_t rows, int threads) {
  const int64_t blocks = (rows * 32 + threads - 1) / threads;
  if (blocks > 0x7fffffff) throw RuntimeError(cat("attention on CUDA: ", rows, " rows exceed the grid"));
  return static_cast<unsigned>(blocks);
}

}  // namespace

int64_t attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask, Tensor& out,
                          Tensor& lse) {
  require_qkv("attention_block_forward", q, k, v);
  const Sizes s = sizes_of(q, k, v);
  const attention::ForwardArgs args{q.raw(), k.raw(), v.raw(), ptr<float>(out), ptr<float>(lse), s, mask_runs(mask)};
  const bool tensor_cores = uses_tensor_cores(q.dtype(), s);
  if (tensor_cores) attention::forward_mma(q.dtype(), args);
  else attention::forward_simt(q.dtype(), args);
  return scores_of(tensor_cores, mask, s);
}

int64_t attention_backward_accumulate(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                      const Tensor& lse, const Tensor& delta, const AttentionMask& mask, Tensor& dq,
                                      Tensor& dk, Tensor& dv) {
  require_qkv("attention_block_backward", q, k, v);
  require_dtype("attention_block_backward", "dout", dout, q.dtype());
  const Sizes s = sizes_of(q, k, v);
  const attention::BackwardArgs args{q.raw(),           k.raw(),        v.raw(),        dout.raw(),     ptr<float>(lse),
                                     ptr<float>(delta), ptr<float>(dq), ptr<float>(dk), ptr<float>(dv), s,
                                     mask_runs(mask)};
  const bool tensor_cores = uses_tensor_cores(q.dtype(), s);
  if (tensor_cores) attention::backward_mma(q.dtype(), args);
  else attention::backward_simt(q.dtype(), args);
  return scores_of(tensor_cores, mask, s);
}

void attention_delta(const Tensor& out, const Tensor& dout, Tensor& delta) {
  const int64_t b = out.dim(0), s = out.dim(1), h = out.dim(2), d = out.dim(3);
  if (b * s * h == 0) return;
  const int threads = 256;
  with_storage(out.dtype(), [&](auto o) {
    with_storage(dout.dtype(), [&](auto g) {
      using O = decltype(o);
      using G = decltype(g);
      delta_kernel<O, G><<<warp_blocks(b * s * h, threads), threads, 0, compute_stream()>>>(
          ptr<O>(out), ptr<G>(dout), ptr<float>(delta), b, s, h, d);
    });
  });
  SEXTANT_CHECK_LAUNCH("attention_delta");
}

void attention_merge_rows(Tensor& out, Tensor& lse, int64_t row0, const Tensor& out_b, const Tensor& lse_b) {
  const int64_t b = out_b.dim(0), s_b = out_b.dim(1), h = out_b.dim(2), d = out_b.dim(3);
  if (b * s_b * h == 0) return;
  const int threads = 256;
  with_storage(out_b.dtype(), [&](auto o) {
    using B = decltype(o);
    merge_kernel<B><<<warp_blocks(b * s_b * h, threads), threads, 0, compute_stream()>>>(
        ptr<float>(out), ptr<float>(lse), out.dim(1), row0, ptr<B>(out_b), ptr<float>(lse_b), b, s_b, h, d);
  });
  SEXTANT_CHECK_LAUNCH("attention_merge");
}

void add_rows(Tensor& acc, int64_t row0, const Tensor& x) {
  const int64_t b = x.dim(0), s_x = x.dim(1), inner = x.dim(1) > 0 ? x.numel() / (b * s_x) : 0;
  if (x.numel() == 0) return;
  const int threads = 256;
  with_storage(x.dtype(), [&](auto t) {
    using X = decltype(t);
    add_rows_kernel<X><<<grid_blocks(x.numel(), threads), threads, 0, compute_stream()>>>(
        ptr<float>(acc), acc.dim(1), row0, ptr<X>(x), b, s_x, inner);
  });
  SEXTANT_CHECK_LAUNCH("add_rows");
}

}  // namespace sextant::ops::cuda
