// What the attention kernels share (attention.cu chooses, attention_mma.cu
// and attention_simt.cu compute): the problem's sizes, the causal mask as
// runs of consecutive global positions, and the visibility rule.
//
// The mask travels in the kernel parameters, never through a host-to-device
// copy: the rows of a block are a few stretches of consecutive positions (one
// for a contiguous shard, two for a zigzag shard, 2P after gathering P of
// them, one per sampled row in a spot check), so a row's position is found
// by scanning at most kMaxRuns runs, and a tile's position range from the
// runs it crosses.
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/ops/cuda/device_common.cuh"

namespace sextant::ops::cuda::attention {

constexpr int kMaxRuns = 64;

// Rows [start[r], start[r + 1]) (the last run: to the end) hold positions
// pos[r], pos[r] + 1, ...
struct PositionRuns {
  int count = 0;
  int start[kMaxRuns] = {};
  int pos[kMaxRuns] = {};
};

struct MaskRuns {
  int causal = 0;
  PositionRuns q, k;
};

// Sizes of one call.
struct Sizes {
  int b = 0, sq = 0, sk = 0, hq = 0, hk = 0, d = 0, group = 1;
  float scale = 1;  // 1 / sqrt(d)
};

// Key j is visible to query i iff key_position(j) <= query_position(i). Rows
// past the end (tile padding) get positions no real row matches: a padding
// key is seen by no query, a padding query sees no key; without a causal
// mask every real key is seen by every real query.
constexpr int kPaddingKey = INT_MAX;
constexpr int kPaddingQuery = INT_MIN;
constexpr int kAnyQuery = INT_MAX - 1;
constexpr int kAnyKey = INT_MIN + 1;

__device__ __forceinline__ int position_of(const PositionRuns& runs, int i) {
  int r = 0;
  while (r + 1 < runs.count && runs.start[r + 1] <= i) ++r;
  return runs.pos[r] + (i - runs.start[r]);
}

__device__ __forceinline__ int query_position(const MaskRuns& m, int i, int sq) {
  if (i >= sq) return kPaddingQuery;
  return m.causal ? position_of(m.q, i) : kAnyQuery;
}

__device__ __forceinline__ int key_position(const MaskRuns& m, int j, int sk) {
  if (j >= sk) return kPaddingKey;
  return m.causal ? position_of(m.k, j) : kAnyKey;
}

// Lowest and highest position of rows [i0, i1) (i1 > i0).
__device__ __forceinline__ void position_range(const PositionRuns& runs, int i0, int i1, int& lo, int& hi) {
  lo = INT_MAX, hi = INT_MIN;
  for (int r = 0; r < runs.count; ++r) {
    const int s = runs.start[r], e = r + 1 < runs.count ? runs.start[r + 1] : INT_MAX;
    const int a = max(s, i0), z = min(e, i1) - 1;
    if (a > z) continue;
    lo = min(lo, runs.pos[r] + (a - s));
    hi = max(hi, runs.pos[r] + (z - s));
  }
}

// Whether no key of rows [k0, k1) is visible to any query of rows [q0, q1):
// a causal tile wholly above the diagonal, skipped.
__device__ __forceinline__ bool tile_hidden(const MaskRuns& m, int q0, int q1, int k0, int k1) {
  if (!m.causal) return false;
  int qlo, qhi, klo, khi;
  position_range(m.q, q0, q1, qlo, qhi);
  position_range(m.k, k0, k1, klo, khi);
  return klo > qhi;
}

// Launchers. q, k, v, dout: [b, s, h, d] storage T (bf16 / f16 for the
// tensor-core kernels); out, lse, delta, dq, dk, dv f32 (attention_block.h).
struct ForwardArgs {
  const void *q, *k, *v;
  float *out, *lse;
  Sizes sizes;
  MaskRuns mask;
};
struct BackwardArgs {
  const void *q, *k, *v, *dout;
  const float *lse, *delta;
  float *dq, *dk, *dv;
  Sizes sizes;
  MaskRuns mask;
};

// Tensor cores (mma.sync m16n8k16), 64 x 64 tiles, head_dim <= kMmaMaxHeadDim.
constexpr int kMmaTile = 64;
constexpr int kMmaMaxHeadDim = 128;
// Whether the tensor-core kernels can run this head_dim on the current GPU
// (compute capability 8.0+, enough shared memory per block).
bool mma_supported(int head_dim);
void forward_mma(DType dtype, const ForwardArgs& args);
void backward_mma(DType dtype, const BackwardArgs& args);

// CUDA cores, f32 math: one warp per query row, keys 32 at a time.
constexpr int kSimtChunk = 32;
constexpr int kSimtMaxHeadDim = 256;
void forward_simt(DType dtype, const ForwardArgs& args);
void backward_simt(DType dtype, const BackwardArgs& args);

}  // namespace sextant::ops::cuda::attention
