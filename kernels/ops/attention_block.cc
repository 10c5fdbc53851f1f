#include "kernels/ops/attention_block.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/op_times.h"
#include "harness/strings.h"
#include "kernels/ops/device_dispatch.h"
#include "kernels/ops/gemm.h"
#include "kernels/ops/host_common.h"
#include "kernels/ops/op_names.h"
#include "kernels/ops/vector_math.h"

// Row loops (max, exp, scaling) get AVX-512 / AVX2 clones picked at load
// time: the build is portable (no -march) and exp is a quarter of the work.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SEXTANT_ROW_LOOP __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SEXTANT_ROW_LOOP
#endif

namespace sextant::ops {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Tile edges: 128 x 128 scores (64 KiB) stay in L2 next to their Q, K, V rows.
constexpr int64_t kTileQ = 128;
constexpr int64_t kTileK = 256;

// Sizes of one call, checked once.
struct Dims {
  int64_t b = 0, sq = 0, sk = 0, hq = 0, hk = 0;
  int64_t d = 0;                           // head dim of q and k
  int64_t dv = 0;                          // head dim of v, out, dout (MLA: other than d)
  int64_t group = 1;                       // query heads per kv head
  float scale = 1;                         // 1/sqrt(d)
  int64_t ldq() const { return hq * d; }   // row stride of q, dq
  int64_t ldk() const { return hk * d; }   // row stride of k, dk
  int64_t ldv() const { return hk * dv; }  // row stride of v, dv
  int64_t ldo() const { return hq * dv; }  // row stride of out, dout
  // Row i of head h in batch bi of a [b, s, heads, d] tensor (or d_v: v_row, o_row).
  int64_t q_row(int64_t bi, int64_t i, int64_t h) const { return ((bi * sq + i) * hq + h) * d; }
  int64_t k_row(int64_t bi, int64_t j, int64_t g) const { return ((bi * sk + j) * hk + g) * d; }
  int64_t v_row(int64_t bi, int64_t j, int64_t g) const { return ((bi * sk + j) * hk + g) * dv; }
  int64_t o_row(int64_t bi, int64_t i, int64_t h) const { return ((bi * sq + i) * hq + h) * dv; }
  // Entry i of head h in batch bi of a [b, hq, sq] tensor (lse, delta).
  int64_t stat(int64_t bi, int64_t h, int64_t i) const { return (bi * hq + h) * sq + i; }
};

Dims check_dims(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask) {
  require_one_device(op, {{"q", &q}, {"k", &k}, {"v", &v}});
  if (q.ndim() != 4 || k.ndim() != 4)
    throw RuntimeError(
        cat(op, ": q ", shape_string(q.shape()), " and k ", shape_string(k.shape()), " must be [b, s, h, d]"));
  Dims g;
  g.b = q.dim(0), g.sq = q.dim(1), g.hq = q.dim(2), g.d = q.dim(3);
  g.sk = k.dim(1), g.hk = k.dim(2);
  if (k.dim(0) != g.b || k.dim(3) != g.d)
    throw RuntimeError(cat(op, ": k ", shape_string(k.shape()), " does not fit q ", shape_string(q.shape())));
  if (v.ndim() != 4 || v.dim(0) != g.b || v.dim(1) != g.sk || v.dim(2) != g.hk)
    throw RuntimeError(cat(op, ": v ", shape_string(v.shape()), " does not fit k ", shape_string(k.shape()),
                           " (only its head dim may differ)"));
  g.dv = v.dim(3);
  if (g.hk <= 0 || g.hq % g.hk != 0)
    throw RuntimeError(cat(op, ": kv heads ", g.hk, " must divide query heads ", g.hq));
  if (mask.positional() &&
      (static_cast<int64_t>(mask.q_pos.size()) != g.sq || static_cast<int64_t>(mask.k_pos.size()) != g.sk))
    throw RuntimeError(cat(op, ": mask has ", mask.q_pos.size(), " query and ", mask.k_pos.size(),
                           " key positions for a block of ", g.sq, " x ", g.sk));
  if (mask.packed() && (!mask.causal || static_cast<int64_t>(mask.q_seq.size()) != g.sq ||
                        static_cast<int64_t>(mask.k_seq.size()) != g.sk))
    throw RuntimeError(cat(op, ": a packed mask needs causal positions and ", g.sq, " query and ", g.sk,
                           " key sequence names, not ", mask.q_seq.size(), " and ", mask.k_seq.size()));
  if (const std::string problem = window_problem(mask.window, mask.causal); !problem.empty())
    throw RuntimeError(cat(op, ": ", problem));
  g.group = g.hq / g.hk;
  g.scale = attention_scale(g.d, g.dv);
  return g;
}

// Rows [start, start + rows) whose global positions run pos, pos + 1, ...,
// all of one sequence (seq: AttentionMask's name of it; 0 when not packed).
struct Tile {
  int64_t start = 0, rows = 0, pos = 0, seq = 0;
};

// Cuts n rows into tiles of at most `size` rows, never across a jump in
// positions (a zigzag shard's two chunks, a gathered sequence's blocks) or a
// change of sequence, so that every tile is one contiguous stretch of one
// sequence.
std::vector<Tile> tiles_of(const std::vector<int64_t>& pos, const std::vector<int64_t>& seq, int64_t n, int64_t size) {
  std::vector<Tile> tiles;
  for (int64_t i = 0; i < n;) {
    int64_t j = i + 1;
    while (j < n && j - i < size && (pos.empty() || pos[j] == pos[j - 1] + 1) && (seq.empty() || seq[j] == seq[i])) ++j;
    tiles.push_back({i, j - i, pos.empty() ? i : pos[i], seq.empty() ? 0 : seq[i]});
    i = j;
  }
  return tiles;
}

Visibility classify(const AttentionMask& m, const Tile& q, const Tile& k) {
  if (!m.positional()) return Visibility::full;
  if (q.seq == AttentionMask::kPaddingRow || k.seq != q.seq) return Visibility::none;  // another sequence, or padding
  const int64_t q_last = q.pos + q.rows - 1, k_last = k.pos + k.rows - 1;
  // Every query's keys run from first_key to last_key, both rising with the query's position.
  if (k.pos > m.last_key(q_last) || k_last < m.first_key(q.pos)) return Visibility::none;
  if (k.pos >= m.first_key(q_last) && k_last <= m.last_key(q.pos)) return Visibility::full;
  return Visibility::partial;
}

// The keys of tile k that query row r of tile q may see: columns [begin, end)
// of the tile, one stretch (the window's start to the diagonal or its end).
struct Columns {
  int64_t begin = 0, end = 0;
};
Columns visible_range(const AttentionMask& m, Visibility tm, const Tile& q, int64_t r, const Tile& k) {
  if (tm == Visibility::full) return {0, k.rows};
  const int64_t pos = q.pos + r;
  const int64_t end = std::clamp<int64_t>(m.last_key(pos) - k.pos + 1, 0, k.rows);
  const int64_t begin = std::clamp<int64_t>(m.first_key(pos) - k.pos, 0, end);
  return {begin, end};
}

// The columns of key tile k that some row of query tile q may see: the
// whole tile unless the diagonal or the window's edge crosses it, then the
// stretch from the first row's window start to the last row's diagonal (the
// rest would be computed only to be masked).
Tile visible_columns(const AttentionMask& m, Visibility tm, const Tile& q, const Tile& k) {
  if (tm != Visibility::partial) return k;
  const int64_t begin = visible_range(m, tm, q, 0, k).begin, end = visible_range(m, tm, q, q.rows - 1, k).end;
  return {k.start + begin, end - begin, k.pos + begin, k.seq};
}

// Online softmax of one score row s[0..n) whose entries [begin, end) are
// visible: updates the running max m and sum l, leaves P = exp(s - m) in s
// (0 where masked) and returns the factor that rescales the row's output.
SEXTANT_ROW_LOOP float softmax_update(float* s, int64_t n, Columns visible, float& m, float& l) {
  if (visible.end <= visible.begin) {
    std::fill(s, s + n, 0.0f);
    return 1.0f;
  }
  float* row = s + visible.begin;
  const int64_t count = visible.end - visible.begin;
  const float m_new = std::max(m, lane_max(row, count));
  const float alpha = m == kNegInf ? 0.0f : vexp(m - m_new);
  const float sum = lane_sum<float>(count, [&](int64_t j) {
    float p = vexp(row[j] - m_new);
    row[j] = p;
    return p;
  });
  std::fill(s, row, 0.0f);
  std::fill(s + visible.end, s + n, 0.0f);
  l = l * alpha + sum;
  m = m_new;
  return alpha;
}

SEXTANT_ROW_LOOP void scale_row(float* x, int64_t n, float factor) {
  for (int64_t j = 0; j < n; ++j) x[j] *= factor;
}

// P = exp(s - lse) on the visible columns, 0 elsewhere (and for rows that
// see no key at all, lse = -inf).
SEXTANT_ROW_LOOP void probabilities(float* s, int64_t n, Columns visible, float lse) {
  if (lse == kNegInf) visible.end = visible.begin;
  std::fill(s, s + visible.begin, 0.0f);
  for (int64_t j = visible.begin; j < visible.end; ++j) s[j] = vexp(s[j] - lse);
  std::fill(s + std::max(visible.begin, visible.end), s + n, 0.0f);
}

// dS = P * (dP - D), written over dP.
SEXTANT_ROW_LOOP void score_grad(const float* p, float* dp, int64_t n, float delta) {
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - delta);
}

// Forward of one (batch, head): every query tile against every key tile.
struct ForwardArgs {
  const Dims& g;
  const float *q, *k, *v;
  const std::vector<Tile>& q_tiles;
  const std::vector<Tile>& k_tiles;
  const AttentionMask& mask;  // its causal flag and window (the tiles carry the rows' positions)
  float* out;                 // f32 [b, sq, hq, dv]
  float* lse;                 // [b, hq, sq]
};

// The KV head query head h reads: consecutive query heads share one.
int64_t kv_head_of(const Dims& g, int64_t h) {
  return kernel_fault_planted(KernelFault::attention_gqa_head_map) ? h % g.hk : h / g.group;
}

int64_t forward_head(const ForwardArgs& a, int64_t bi, int64_t h, std::vector<float>& s, std::vector<float>& acc) {
  const Dims& g = a.g;
  const int64_t kvh = kv_head_of(g, h);
  int64_t scores = 0;
  float m[kTileQ], l[kTileQ];
  for (const Tile& qt : a.q_tiles) {
    std::fill(acc.begin(), acc.begin() + qt.rows * g.dv, 0.0f);
    std::fill(m, m + qt.rows, kNegInf);
    std::fill(l, l + qt.rows, 0.0f);
    const float* qp = a.q + g.q_row(bi, qt.start, h);
    for (const Tile& k_tile : a.k_tiles) {
      const Visibility tm = classify(a.mask, qt, k_tile);
      if (tm == Visibility::none) continue;
      const Tile kt = visible_columns(a.mask, tm, qt, k_tile);
      const float* kp = a.k + g.k_row(bi, kt.start, kvh);
      const float* vp = a.v + g.v_row(bi, kt.start, kvh);
      // s: [q rows, k rows] = scale * Q K^T
      gemm_f32(false, true, qt.rows, kt.rows, g.d, g.scale, qp, g.ldq(), kp, g.ldk(), 0.0f, s.data(), kTileK);
      for (int64_t r = 0; r < qt.rows; ++r) {
        float alpha = softmax_update(&s[r * kTileK], kt.rows, visible_range(a.mask, tm, qt, r, kt), m[r], l[r]);
        if (alpha != 1.0f) scale_row(&acc[r * g.dv], g.dv, alpha);
      }
      // acc: [q rows, dv] += P V
      gemm_f32(false, false, qt.rows, g.dv, kt.rows, 1.0f, s.data(), kTileK, vp, g.ldv(), 1.0f, acc.data(), g.dv);
      scores += qt.rows * kt.rows;
    }
    for (int64_t r = 0; r < qt.rows; ++r) {
      float* o = a.out + g.o_row(bi, qt.start + r, h);
      const bool seen = l[r] > 0.0f;
      for (int64_t x = 0; x < g.dv; ++x) o[x] = seen ? acc[r * g.dv + x] / l[r] : 0.0f;
      a.lse[g.stat(bi, h, qt.start + r)] = seen ? m[r] + std::log(l[r]) : kNegInf;
    }
  }
  return scores;
}

// Backward of one (batch, head), accumulating into dq, dk, dv (f32).
struct BackwardArgs {
  const Dims& g;
  const float *q, *k, *v, *dout, *lse, *delta;
  const std::vector<Tile>& q_tiles;
  const std::vector<Tile>& k_tiles;
  const AttentionMask& mask;  // its causal flag and window (the tiles carry the rows' positions)
  float *dq, *dk, *dv;
};

int64_t backward_head(const BackwardArgs& a, int64_t bi, int64_t h, std::vector<float>& p, std::vector<float>& dp) {
  const Dims& g = a.g;
  const int64_t kvh = kv_head_of(g, h);
  int64_t scores = 0;
  for (const Tile& qt : a.q_tiles) {
    const float* qp = a.q + g.q_row(bi, qt.start, h);
    const float* dop = a.dout + g.o_row(bi, qt.start, h);
    float* dqp = a.dq + g.q_row(bi, qt.start, h);
    const float* lse = a.lse + g.stat(bi, h, qt.start);
    const float* delta = a.delta + g.stat(bi, h, qt.start);
    for (const Tile& k_tile : a.k_tiles) {
      const Visibility tm = classify(a.mask, qt, k_tile);
      if (tm == Visibility::none) continue;
      const Tile kt = visible_columns(a.mask, tm, qt, k_tile);
      const int64_t krow = g.k_row(bi, kt.start, kvh), vrow = g.v_row(bi, kt.start, kvh);
      // p: [q rows, k rows] = exp(scale * Q K^T - LSE)
      gemm_f32(false, true, qt.rows, kt.rows, g.d, g.scale, qp, g.ldq(), a.k + krow, g.ldk(), 0.0f, p.data(), kTileK);
      for (int64_t r = 0; r < qt.rows; ++r)
        probabilities(&p[r * kTileK], kt.rows, visible_range(a.mask, tm, qt, r, kt), lse[r]);
      // dV += P^T dO;  dP = dO V^T;  dS = P * (dP - D)
      gemm_f32(true, false, kt.rows, g.dv, qt.rows, 1.0f, p.data(), kTileK, dop, g.ldo(), 1.0f, a.dv + vrow, g.ldv());
      gemm_f32(false, true, qt.rows, kt.rows, g.dv, 1.0f, dop, g.ldo(), a.v + vrow, g.ldv(), 0.0f, dp.data(), kTileK);
      const bool no_delta = kernel_fault_planted(KernelFault::attention_backward_softmax_grad);
      for (int64_t r = 0; r < qt.rows; ++r)
        score_grad(&p[r * kTileK], &dp[r * kTileK], kt.rows, no_delta ? 0.0f : delta[r]);
      // dQ += scale dS K;  dK += scale dS^T Q
      gemm_f32(false, false, qt.rows, g.d, kt.rows, g.scale, dp.data(), kTileK, a.k + krow, g.ldk(), 1.0f, dqp,
               g.ldq());
      gemm_f32(true, false, kt.rows, g.d, qt.rows, g.scale, dp.data(), kTileK, qp, g.ldq(), 1.0f, a.dk + krow, g.ldk());
      scores += qt.rows * kt.rows;
    }
  }
  return scores;
}

// The mask a kernel applies: the caller's, or under the planted fault
// causal_mask_diagonal one whose keys sit a position later, so that a query
// no longer sees its own key.
// Under attention_window_off_by_one, a windowed mask's window is one key
// wider (before the query, or after it when only that side is bounded).
const AttentionMask& applied_mask(const AttentionMask& mask, AttentionMask& shifted) {
  const bool diagonal = mask.causal && kernel_fault_planted(KernelFault::causal_mask_diagonal);
  const bool window = mask.windowed() && kernel_fault_planted(KernelFault::attention_window_off_by_one);
  if (!diagonal && !window) return mask;
  shifted = mask;
  if (diagonal)
    for (int64_t& pos : shifted.k_pos) ++pos;
  if (window) ++(shifted.window.left != AttentionMask::kNoWindow ? shifted.window.left : shifted.window.right);
  return shifted;
}

// Whether cuDNN's fused engines may take the block (q/k and v head dims both
// in range; cuDNN's own checks decide per piece whether it takes d_qk != d_v).
bool fused_supports(DType dtype, const Dims& g) {
  return fused_attention_supports(dtype, g.d) && fused_attention_supports(dtype, g.dv);
}

void require_f32(const char* op, const char* name, const Tensor& t, const Shape& shape) {
  require_shape(op, name, t, shape);
  if (t.dtype() != DType::f32) throw RuntimeError(cat(op, ": ", name, " must be f32, not ", dtype_name(t.dtype())));
}

}  // namespace

float attention_scale(int64_t d, int64_t dv) {
  // Under the planted attention_scale_from_v_dim the scale comes from V's head dim.
  const int64_t dim = kernel_fault_planted(KernelFault::attention_scale_from_v_dim) ? dv : d;
  return dim > 0 ? 1.0f / std::sqrt(static_cast<float>(dim)) : 1.0f;
}

AttentionOut attention_block_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const AttentionMask& caller_mask, DType out_dtype, AttentionImpl impl) {
  OpTimer timer(timed::kAttention, q.device());
  AttentionMask shifted;
  const AttentionMask& mask = applied_mask(caller_mask, shifted);
  Dims g = check_dims("attention_block_forward", q, k, v, mask);
  if (kernel_fault_planted(KernelFault::attention_forward_scale)) g.scale = 1.0f / static_cast<float>(g.d);
  AttentionOut result;
  const Shape out_shape{g.b, g.sq, g.hq, g.dv};
  if (!q.is_host()) {  // f32 out, rounded once to out_dtype as HostOut does below
    Tensor out32 = Tensor::empty(out_shape, DType::f32, q.device());
    result.lse = Tensor::empty({g.b, g.hq, g.sq}, DType::f32, q.device());
    if (impl == AttentionImpl::cudnn && fused_supports(q.dtype(), g) && !mask.windowed())
      result.scores = SEXTANT_CUDA_CALL(cuda::attention_forward_cudnn(q, k, v, mask, out32, result.lse));
    else result.scores = SEXTANT_CUDA_CALL(cuda::attention_forward(q, k, v, mask, out32, result.lse));
    result.out = out_dtype == DType::f32 ? out32 : out32.to(out_dtype);
    return result;
  }
  result.out = Tensor::empty(out_shape, out_dtype);
  result.lse = Tensor::empty({g.b, g.hq, g.sq}, DType::f32);
  HostIn<float> q32(q), k32(k), v32(v);
  HostOut<float> out32(result.out);
  const std::vector<Tile> q_tiles = tiles_of(mask.q_pos, mask.q_seq, g.sq, kTileQ);
  const std::vector<Tile> k_tiles = tiles_of(mask.k_pos, mask.k_seq, g.sk, kTileK);
  ForwardArgs args{g, q32.get(), k32.get(), v32.get(), q_tiles, k_tiles, mask, out32.get(), result.lse.data<float>()};
  std::vector<float> s(kTileQ * kTileK), acc(kTileQ * std::max<int64_t>(g.dv, 1));
  for (int64_t bi = 0; bi < g.b; ++bi)
    for (int64_t h = 0; h < g.hq; ++h) result.scores += forward_head(args, bi, h, s, acc);
  out32.store();
  return result;
}

Tensor attention_delta(const Tensor& out, const Tensor& dout) {
  OpTimer timer(timed::kAttention, out.device());
  require_one_device("attention_delta", {{"out", &out}, {"dout", &dout}});
  require_shape("attention_delta", "dout", dout, out.shape());
  if (out.ndim() != 4)
    throw RuntimeError("attention_delta: out " + shape_string(out.shape()) + " must be [b, s, h, d]");
  const int64_t b = out.dim(0), s = out.dim(1), h = out.dim(2), d = out.dim(3);
  Tensor delta = Tensor::empty({b, h, s}, DType::f32, out.device());
  if (!out.is_host()) {
    SEXTANT_CUDA_CALL(cuda::attention_delta(out, dout, delta));
    return delta;
  }
  HostIn<float> o32(out), do32(dout);
  float* dst = delta.data<float>();
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t hh = 0; hh < h; ++hh) {
        const float* o = o32.get() + ((bi * s + i) * h + hh) * d;
        const float* dO = do32.get() + ((bi * s + i) * h + hh) * d;
        dst[(bi * h + hh) * s + i] = lane_sum<float>(d, [&](int64_t x) { return o[x] * dO[x]; });
      }
  return delta;
}

int64_t attention_block_backward_accumulate(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                            const Tensor& dout, const Tensor& lse, const Tensor& delta,
                                            const AttentionMask& caller_mask, Tensor& dq, Tensor& dk, Tensor& dv,
                                            AttentionImpl impl) {
  OpTimer timer(timed::kAttention, q.device());
  const char* op = "attention_block_backward";
  AttentionMask shifted;
  const AttentionMask& mask = applied_mask(caller_mask, shifted);
  const Dims g = check_dims(op, q, k, v, mask);
  require_one_device(
      op, {{"q", &q}, {"dout", &dout}, {"lse", &lse}, {"delta", &delta}, {"dq", &dq}, {"dk", &dk}, {"dv", &dv}});
  const Shape out_shape{g.b, g.sq, g.hq, g.dv};
  require_shape(op, "dout", dout, out_shape);
  require_f32(op, "lse", lse, {g.b, g.hq, g.sq});
  require_f32(op, "delta", delta, {g.b, g.hq, g.sq});
  require_f32(op, "dq", dq, q.shape());
  require_f32(op, "dk", dk, k.shape());
  require_f32(op, "dv", dv, v.shape());
  if (!q.is_host() && impl == AttentionImpl::cudnn && fused_supports(q.dtype(), g) && !mask.windowed()) {
    require_one_device(op, {{"q", &q}, {"out", &out}});
    require_shape(op, "out", out, out_shape);
    return SEXTANT_CUDA_CALL(
        cuda::attention_backward_accumulate_cudnn(q, k, v, out, dout, lse, delta, mask, dq, dk, dv));
  }
  if (!q.is_host())
    return SEXTANT_CUDA_CALL(cuda::attention_backward_accumulate(q, k, v, dout, lse, delta, mask, dq, dk, dv));
  HostIn<float> q32(q), k32(k), v32(v), do32(dout);
  const std::vector<Tile> q_tiles = tiles_of(mask.q_pos, mask.q_seq, g.sq, kTileQ);
  const std::vector<Tile> k_tiles = tiles_of(mask.k_pos, mask.k_seq, g.sk, kTileK);
  BackwardArgs args{
      g,       q32.get(), k32.get(), v32.get(),        do32.get(),       lse.data<float>(), delta.data<float>(),
      q_tiles, k_tiles,   mask,      dq.data<float>(), dk.data<float>(), dv.data<float>()};
  std::vector<float> p(kTileQ * kTileK), dp(kTileQ * kTileK);
  int64_t scores = 0;
  for (int64_t bi = 0; bi < g.b; ++bi)
    for (int64_t h = 0; h < g.hq; ++h) scores += backward_head(args, bi, h, p, dp);
  return scores;
}

AttentionGrads attention_block_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                        const Tensor& lse, const Tensor& dout, const AttentionMask& mask,
                                        AttentionImpl impl) {
  AttentionGrads grads{Tensor::zeros(q.shape(), DType::f32, q.device()),
                       Tensor::zeros(k.shape(), DType::f32, q.device()),
                       Tensor::zeros(v.shape(), DType::f32, q.device())};
  attention_block_backward_accumulate(q, k, v, out, dout, lse, attention_delta(out, dout), mask, grads.dq, grads.dk,
                                      grads.dv, impl);
  return grads;
}

void attention_merge(Tensor& out, Tensor& lse, const Tensor& out_b, const Tensor& lse_b) {
  const char* op = "attention_merge";
  if (out.ndim() != 4) throw RuntimeError(cat(op, ": out ", shape_string(out.shape()), " must be [b, s, h, d]"));
  require_f32(op, "out_b", out_b, out.shape());
  attention_merge_rows(out, lse, 0, out_b, lse_b);
}

void attention_merge_rows(Tensor& out, Tensor& lse, int64_t row0, const Tensor& out_b, const Tensor& lse_b) {
  OpTimer timer(timed::kAttention, out.device());
  const char* op = "attention_merge";
  require_one_device(op, {{"out", &out}, {"lse", &lse}, {"out_b", &out_b}, {"lse_b", &lse_b}});
  if (out.ndim() != 4 || out_b.ndim() != 4)
    throw RuntimeError(cat(op, ": out ", shape_string(out.shape()), " and out_b ", shape_string(out_b.shape()),
                           " must be [b, s, h, d]"));
  const int64_t b = out.dim(0), s = out.dim(1), h = out.dim(2), d = out.dim(3), s_b = out_b.dim(1);
  require_f32(op, "out", out, out.shape());
  require_shape(op, "out_b", out_b, {b, s_b, h, d});
  if (row0 < 0 || row0 + s_b > s)
    throw RuntimeError(cat(op, ": rows [", row0, ", ", row0 + s_b, ") are not rows of out's ", s));
  require_f32(op, "lse", lse, {b, h, s});
  require_f32(op, "lse_b", lse_b, {b, h, s_b});
  if (!out.is_host()) return SEXTANT_CUDA_CALL(cuda::attention_merge_rows(out, lse, row0, out_b, lse_b));
  HostIn<float> ob32(out_b);
  float* o = out.data<float>();
  float* l = lse.data<float>();
  const float* ob = ob32.get();
  const float* lb = lse_b.data<float>();
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t i = 0; i < s_b; ++i) {
        const int64_t stat = (bi * h + hh) * s + row0 + i, row = ((bi * s + row0 + i) * h + hh) * d;
        const int64_t stat_b = (bi * h + hh) * s_b + i, row_b = ((bi * s_b + i) * h + hh) * d;
        const float la = l[stat], lbv = lb[stat_b];
        if (lbv == kNegInf) continue;  // b saw nothing: keep a (also when both are empty)
        if (la == kNegInf) {           // a saw nothing: take b
          std::copy(ob + row_b, ob + row_b + d, o + row);
          l[stat] = lbv;
          continue;
        }
        // out' = out - sigmoid(lse_b - lse) (out - out_b): the weight comes from
        // the difference of the LSEs, never from exp(lse - lse'), which loses
        // digits when |lse| is large.
        const float diff = lbv - la;
        const float wb = diff >= 0 ? 1.0f / (1.0f + std::exp(-diff)) : std::exp(diff) / (1.0f + std::exp(diff));
        for (int64_t x = 0; x < d; ++x) o[row + x] += wb * (ob[row_b + x] - o[row + x]);
        const float hi = std::max(la, lbv), lo = std::min(la, lbv);
        l[stat] = kernel_fault_planted(KernelFault::attention_merge_lse) ? hi : hi + std::log1p(std::exp(lo - hi));
      }
}

}  // namespace sextant::ops
