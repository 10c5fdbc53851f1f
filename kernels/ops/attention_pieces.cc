#include "kernels/ops/attention_pieces.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/strings.h"
#include "kernels/ops/cuda_ops.h"
#include "kernels/ops/device_dispatch.h"

namespace sextant::ops {

namespace {

// Rows [start, start + len) at positions pos.. of one sequence (seq; -1 when
// the mask is not packed).
struct Run {
  int64_t start = 0, len = 0, pos = 0, seq = -1;
};

std::vector<Run> runs_of(const std::vector<int64_t>& pos, const std::vector<int64_t>& seq) {
  std::vector<Run> runs;
  for (size_t r = 0; r < pos.size(); ++r) {
    const int64_t i = static_cast<int64_t>(r), name = seq.empty() ? -1 : seq[r];
    if (!seq.empty() && name == AttentionMask::kPaddingRow) continue;
    if (!runs.empty()) {
      Run& last = runs.back();
      if (last.start + last.len == i && last.pos + last.len == pos[r] && last.seq == name) {
        ++last.len;
        continue;
      }
    }
    runs.push_back({i, 1, pos[r], name});
  }
  return runs;
}

// Query row q.pos + i sees key k.pos + j iff k.pos + j <= q.pos + i.
void cut_pair(const Run& q, const Run& k, std::vector<AttentionPiece>& out) {
  const int64_t offset = q.pos - k.pos;
  const int64_t first = std::max<int64_t>(0, -offset);  // rows before it see no key
  if (first >= q.len) return;
  const int64_t lead = first + offset;  // row `first` sees keys [0, lead]
  if (lead >= k.len - 1) {
    out.push_back({q.start + first, q.len - first, k.start, k.len, false});
    return;
  }
  if (lead > 0) out.push_back({q.start + first, q.len - first, k.start, lead, false});
  const int64_t side = std::min(q.len - first, k.len - lead);  // the diagonal square
  // A square of one is one visible pair: no mask (it joins its neighbours).
  out.push_back({q.start + first, side, k.start + lead, side, side > 1});
  if (q.len - first > side)  // later rows see every key from lead on
    out.push_back({q.start + first + side, q.len - first - side, k.start + lead, k.len - lead, false});
}

// A sliding window's band of one run pair, one row at a time: row i sees
// the keys of the run at positions [first_key, last_key] of its own, a
// rectangle of one row (coalesce joins rows whose keys are the same).
void cut_pair_windowed(const Run& q, const Run& k, const AttentionMask& mask, std::vector<AttentionPiece>& out) {
  for (int64_t i = 0; i < q.len; ++i) {
    const int64_t pos = q.pos + i;
    const int64_t first = std::max(k.pos, mask.first_key(pos)), last = std::min(k.pos + k.len - 1, mask.last_key(pos));
    if (first <= last) out.push_back({q.start + i, 1, k.start + first - k.pos, last - first + 1, false});
  }
}

// Joins no-mask pieces over the same keys and adjacent queries, then over
// the same queries and adjacent keys: fewer, larger calls.
std::vector<AttentionPiece> coalesce(std::vector<AttentionPiece> pieces) {
  auto by_keys = [](const AttentionPiece& a, const AttentionPiece& b) {
    return std::tie(a.causal, a.k0, a.sk, a.q0) < std::tie(b.causal, b.k0, b.sk, b.q0);
  };
  auto by_queries = [](const AttentionPiece& a, const AttentionPiece& b) {
    return std::tie(a.causal, a.q0, a.sq, a.k0) < std::tie(b.causal, b.q0, b.sq, b.k0);
  };
  auto below = [](AttentionPiece& a, const AttentionPiece& b) {
    if (a.k0 != b.k0 || a.sk != b.sk || a.q0 + a.sq != b.q0) return false;
    a.sq += b.sq;
    return true;
  };
  auto beside = [](AttentionPiece& a, const AttentionPiece& b) {
    if (a.q0 != b.q0 || a.sq != b.sq || a.k0 + a.sk != b.k0) return false;
    a.sk += b.sk;
    return true;
  };
  auto pass = [&](auto order, auto join) {
    std::sort(pieces.begin(), pieces.end(), order);
    std::vector<AttentionPiece> joined;
    for (const AttentionPiece& p : pieces)
      if (joined.empty() || p.causal || joined.back().causal || !join(joined.back(), p)) joined.push_back(p);
    pieces = std::move(joined);
  };
  pass(by_keys, below);
  pass(by_queries, beside);
  return pieces;
}

// Same positions on both sides, strictly increasing, one sequence: index
// order is position order, so the whole block is one causal diagonal.
bool index_causal(const AttentionMask& mask) {
  if (mask.q_pos != mask.k_pos || mask.q_seq != mask.k_seq) return false;
  for (size_t i = 0; i < mask.q_pos.size(); ++i) {
    if (i > 0 && mask.q_pos[i] <= mask.q_pos[i - 1]) return false;
    if (mask.packed() && (mask.q_seq[i] != mask.q_seq[0] || mask.q_seq[i] == AttentionMask::kPaddingRow)) return false;
  }
  return true;
}

}  // namespace

std::vector<AttentionPiece> attention_pieces(const AttentionMask& mask, int64_t sq, int64_t sk) {
  if (sq == 0 || sk == 0) return {};
  if (!mask.positional() || visibility(mask) == Visibility::full) return {{0, sq, 0, sk, false}};
  if (visibility(mask) == Visibility::none) return {};
  if (!mask.windowed() && index_causal(mask)) return {{0, sq, 0, sk, sq > 1}};
  std::vector<AttentionPiece> pieces;
  const std::vector<Run> q_runs = runs_of(mask.q_pos, mask.q_seq), k_runs = runs_of(mask.k_pos, mask.k_seq);
  for (const Run& q : q_runs)
    for (const Run& k : k_runs)
      if (q.seq != k.seq) continue;
      else if (mask.windowed()) cut_pair_windowed(q, k, mask, pieces);
      else cut_pair(q, k, pieces);
  std::vector<AttentionPiece> out = coalesce(std::move(pieces));
  if (kernel_fault_planted(KernelFault::attention_pieces_drop_last) && out.size() > 1) out.pop_back();
  return out;
}

namespace {

// acc[:, row0 + i] += x[:, i]: acc f32 [b, s, ...], x [b, s_x, ...] of the same inner shape.
void add_rows(Tensor& acc, int64_t row0, const Tensor& x) {
  if (!acc.is_host()) return SEXTANT_CUDA_CALL(cuda::add_rows(acc, row0, x));
  const Tensor x32 = x.dtype() == DType::f32 ? x : x.to(DType::f32);
  const int64_t b = x.dim(0), rows = x.dim(1), inner = rows > 0 ? x.numel() / (b * rows) : 0;
  float* a = acc.data<float>();
  const float* v = x32.data<float>();
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t e = 0; e < rows * inner; ++e) a[(bi * acc.dim(1) + row0) * inner + e] += v[bi * rows * inner + e];
}

int64_t piece_scores(const Tensor& q, const AttentionPiece& p) {
  return q.dim(0) * q.dim(2) * (p.causal ? p.sq * (p.sq + 1) / 2 : p.sq * p.sk);
}

}  // namespace

Tensor piece_rows(const Tensor& t, int64_t row0, int64_t n, int dim) {
  return n == t.dim(dim) ? t : narrow(t, dim, row0, n);
}

int64_t forward_by_pieces(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                          const PieceKernels& kernels, Tensor& out, Tensor& lse) {
  const int64_t b = q.dim(0), hq = q.dim(2), dv = v.dim(3);
  out = Tensor::zeros({b, q.dim(1), hq, dv}, DType::f32, q.device());
  Tensor empty = Tensor::empty({b, hq, q.dim(1)}, DType::f32);
  std::fill(empty.data<float>(), empty.data<float>() + empty.numel(), -std::numeric_limits<float>::infinity());
  lse = q.is_host() ? empty : empty.to(q.device());
  int64_t scores = 0;
  for (const AttentionPiece& p : attention_pieces(mask, q.dim(1), k.dim(1))) {
    const PieceOut r = kernels.forward(p);
    attention_merge_rows(out, lse, p.q0, r.o, r.stats);
    scores += piece_scores(q, p);
  }
  return scores;
}

int64_t backward_by_pieces(const Tensor& q, const Tensor& k, const Tensor& lse, const AttentionMask& mask,
                           const PieceKernels& kernels, Tensor& dq, Tensor& dk, Tensor& dv) {
  int64_t scores = 0;
  for (const AttentionPiece& p : attention_pieces(mask, q.dim(1), k.dim(1))) {
    const PieceGrads g = kernels.backward(p, piece_rows(lse, p.q0, p.sq, 2));
    add_rows(dq, p.q0, g.dq);
    add_rows(dk, p.k0, g.dk);
    add_rows(dv, p.k0, g.dv);
    scores += piece_scores(q, p);
  }
  return scores;
}

PieceKernels own_piece_kernels(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                               const Tensor& dout) {
  PieceKernels kernels;
  kernels.forward = [=](const AttentionPiece& p) {
    AttentionOut r = attention_block_forward(narrow(q, 1, p.q0, p.sq), narrow(k, 1, p.k0, p.sk),
                                             narrow(v, 1, p.k0, p.sk), p.mask(), q.dtype());
    return PieceOut{r.out, r.lse};
  };
  kernels.backward = [=](const AttentionPiece& p, const Tensor& lse) {
    const Tensor qp = narrow(q, 1, p.q0, p.sq), op = narrow(out, 1, p.q0, p.sq), dop = narrow(dout, 1, p.q0, p.sq);
    PieceGrads g{Tensor::zeros(qp.shape(), DType::f32), Tensor::zeros({k.dim(0), p.sk, k.dim(2), k.dim(3)}, DType::f32),
                 Tensor::zeros({v.dim(0), p.sk, v.dim(2), v.dim(3)}, DType::f32)};
    attention_block_backward_accumulate(qp, narrow(k, 1, p.k0, p.sk), narrow(v, 1, p.k0, p.sk), op, dop, lse,
                                        attention_delta(op, dop), p.mask(), g.dq, g.dk, g.dv);
    return PieceGrads{g.dq.to(q.dtype()), g.dk.to(q.dtype()), g.dv.to(q.dtype())};
  };
  return kernels;
}

}  // namespace sextant::ops
