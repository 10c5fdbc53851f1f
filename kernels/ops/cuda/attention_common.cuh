// What the attention kernels share (attention.cu chooses, attention_mma.cu
// and attention_simt.cu compute): the problem's sizes, the causal mask as
// runs of consecutive global positions, and the visibility rule.
//
// The mask travels in the kernel parameters, never through a host-to-device
// copy: the rows of a block are a few stretches of consecutive positions (one
// for a contiguous shard, two for a zigzag shard, 2P after gathering P of
// them, one per sampled row in a spot check, two per sequence of a packed
// shard), so a row's position is found by scanning at most kMaxRuns runs,
// and a tile's position range from the runs it crosses.
//
// Packed sequences (THD): a run also names its sequence by the position of
// the sequence's first row (attention_block.h), or kPaddingRun. A query row
// then sees the keys whose positions lie in its window [sequence start, own
// position]; without packing the window starts at kNoStart, and without a
// causal mask or a sliding window every real key is in every real query's
// window. A sliding window narrows it to [pos - left, pos + right] (right
// only without a causal mask, whose window ends at the query).
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/ops/attention_block.h"
#include "kernels/ops/cuda/device_common.cuh"

namespace sextant::ops::cuda::attention {

constexpr int kMaxRuns = kCudaMaskRuns;  // attention_block.h; 3 KiB of kernel parameters for both masks
constexpr int kPaddingRun = -1;          // a run of padding rows: they see nothing and are seen by nothing

// Rows [start[r], start[r + 1]) (the last run: to the end) hold positions
// pos[r], pos[r] + 1, ... of the sequence that starts at position seq[r].
struct PositionRuns {
  int count = 0;
  int start[kMaxRuns] = {};
  int pos[kMaxRuns] = {};
  int seq[kMaxRuns] = {};
};

struct MaskRuns {
  int causal = 0;
  int positional = 0;     // the runs are set: causal or windowed
  int packed = 0;         // seq of the runs is set
  int window_left = -1;   // sliding window: keys at most this far before the query; -1: none
  int window_right = -1;  // and at most this far after it (no causal mask); -1: none
  PositionRuns q, k;
};

// Sizes of one call: d is the head dim of q and k, dv that of v, out and
// dout (MLA: other than d; the tensor-core kernels take d = dv only).
struct Sizes {
  int b = 0, sq = 0, sk = 0, hq = 0, hk = 0, d = 0, dv = 0, group = 1;
  float scale = 1;  // 1 / sqrt(d)
};

// Key j is visible to query i iff its position lies in the query's window
// [lo, hi]. Rows past the end (tile padding) and padding rows of a pack get
// values no real row matches: such a key is seen by no query (kPaddingKey
// lies in no window), such a query sees no key (an empty window).
constexpr int kPaddingKey = INT_MAX;
constexpr int kNoStart = INT_MIN;
constexpr int kAnyQuery = INT_MAX - 1;
constexpr int kAnyKey = INT_MIN + 1;

struct Window {
  int lo, hi;
};
constexpr Window kEmptyWindow{INT_MAX, INT_MIN};

__device__ __forceinline__ bool in_window(int key_pos, const Window& w) { return w.lo <= key_pos && key_pos <= w.hi; }

// The run that holds row i: the last one starting at or before it (binary search).
__device__ __forceinline__ int run_of(const PositionRuns& runs, int i) {
  int lo = 0, hi = runs.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (runs.start[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ Window query_window(const MaskRuns& m, int i, int sq) {
  if (i >= sq) return kEmptyWindow;
  if (!m.positional) return {kAnyKey, kAnyQuery};
  const int r = run_of(m.q, i);
  if (m.packed && m.q.seq[r] == kPaddingRun) return kEmptyWindow;
  const int pos = m.q.pos[r] + (i - m.q.start[r]);
  const int start = m.packed ? m.q.seq[r] : kNoStart;
  const int last = m.causal ? pos : m.window_right >= 0 ? pos + m.window_right : kAnyQuery;
  return {m.window_left >= 0 ? max(start, pos - m.window_left) : start, last};
}

__device__ __forceinline__ int key_position(const MaskRuns& m, int j, int sk) {
  if (j >= sk) return kPaddingKey;
  if (!m.positional) return kAnyKey;
  const int r = run_of(m.k, j);
  if (m.packed && m.k.seq[r] == kPaddingRun) return kPaddingKey;
  return m.k.pos[r] + (j - m.k.start[r]);
}

// Over the non-padding rows of [i0, i1): hi = the highest position, and
// lo = the lowest window start (starts: queries; kNoStart unpacked) or the
// lowest position (keys). With no such row, lo > hi.
__device__ __forceinline__ void run_range(const PositionRuns& runs, bool packed, bool starts, int i0, int i1, int& lo,
                                          int& hi) {
  lo = INT_MAX, hi = INT_MIN;
  for (int r = 0; r < runs.count; ++r) {
    if (packed && runs.seq[r] == kPaddingRun) continue;
    const int s = runs.start[r], e = r + 1 < runs.count ? runs.start[r + 1] : INT_MAX;
    const int a = max(s, i0), z = min(e, i1) - 1;
    if (a > z) continue;
    lo = min(lo, starts ? (packed ? runs.seq[r] : kNoStart) : runs.pos[r] + (a - s));
    hi = max(hi, runs.pos[r] + (z - s));
  }
}

// Whether no key of rows [k0, k1) is visible to any query of rows [q0, q1):
// a causal tile wholly above the diagonal, wholly outside every query's
// sliding window, or wholly in other sequences (packed), skipped. With a
// window every row's window starts at or after max(lowest start, lowest
// position - left) and ends at or before the highest position + right, so
// those bounds never hide a visible key.
__device__ __forceinline__ bool tile_hidden(const MaskRuns& m, int q0, int q1, int k0, int k1) {
  if (!m.positional) return false;
  int q_lo, q_hi, k_lo, k_hi;
  run_range(m.q, m.packed, true, q0, q1, q_lo, q_hi);
  run_range(m.k, m.packed, false, k0, k1, k_lo, k_hi);
  if (q_lo > q_hi || k_lo > k_hi) return true;  // only padding on one side
  if (m.window_left >= 0) {
    int pos_lo, pos_hi;
    run_range(m.q, m.packed, false, q0, q1, pos_lo, pos_hi);
    q_lo = max(q_lo, pos_lo - m.window_left);
  }
  if (!m.causal) q_hi = m.window_right >= 0 ? q_hi + m.window_right : kAnyQuery;
  return k_lo > q_hi || k_hi < q_lo;
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
