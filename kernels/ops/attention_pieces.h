// A block of attention cut into rectangles that a fused attention library
// computes with no mask or with the plain causal diagonal, which is all that
// cuDNN's fused SDPA needs to support. The pieces of one query row merge by
// their LSE (attention_merge), as ring steps do.
//
// A ring over zigzag shards (TransformerEngine's context_parallel.py) gives
// exactly the shapes TE runs: the diagonal step is one causal piece, a step
// with an earlier block one no-mask piece over the lower half of the keys,
// a step with a later block one no-mask piece over the upper half of the
// queries. Any other mask (contiguous shards at an offset, packed sequences)
// is cut along its runs of consecutive positions; a sliding window's band
// into rectangles of one query row each (joined where rows see the same keys).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/ops/attention_block.h"

namespace sextant::ops {

// Query rows [q0, q0 + sq) against key rows [k0, k0 + sk). causal: sq == sk
// > 1 and key k0 + j is visible to query q0 + i iff j <= i (top-left
// diagonal); otherwise every key of the piece is visible to every query of
// it (a diagonal of one row is one visible pair: no mask).
struct AttentionPiece {
  int64_t q0 = 0, sq = 0, k0 = 0, sk = 0;
  bool causal = false;
  bool operator==(const AttentionPiece&) const = default;
  // The piece's own mask, its rows counted from 0.
  AttentionMask mask() const { return causal ? AttentionMask::causal_blocks(0, sq, 0, sk) : AttentionMask::none(); }
};

// Pieces that together cover exactly the visible (query, key) pairs of a
// block of sq queries and sk keys, each pair once. Padding rows are in none.
std::vector<AttentionPiece> attention_pieces(const AttentionMask& mask, int64_t sq, int64_t sk);

// What a fused attention library computes for one piece, on the block's
// tensors it holds (q, k, v; out and dout for the backward).
struct PieceOut {
  Tensor o;      // [b, p.sq, hq, dv], any dtype (cuDNN: the storage dtype)
  Tensor stats;  // [b, hq, p.sq] f32: the LSE
};
struct PieceGrads {
  Tensor dq, dk, dv;  // [b, p.sq, hq, d], [b, p.sk, hk, d], [b, p.sk, hk, dv], any dtype
};
struct PieceKernels {
  std::function<PieceOut(const AttentionPiece& p)> forward;
  // From the block's final out and the piece's rows of the final LSE (lse: [b, hq, p.sq] f32).
  std::function<PieceGrads(const AttentionPiece& p, const Tensor& lse)> backward;
};

// Our block kernels (attention_block.h, attention_impl own) standing in for
// a fused library: a piece's forward with no mask or the top-left causal
// diagonal (O in the storage dtype and the LSE), and its backward from the
// block's final O, dout and the piece's rows of the final LSE, gradients in
// the storage dtype, as cuDNN's SDPA returns them. The piece driver run with
// these checks the pieces, the merge and the accumulation on the host.
PieceKernels own_piece_kernels(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                               const Tensor& dout);

// Rows [row0, row0 + n) of a block tensor along dim ([b, s, h, d]: 1;
// statistics [b, h, s]: 2), contiguous: the tensor itself when they are all of it.
Tensor piece_rows(const Tensor& t, int64_t row0, int64_t n, int dim = 1);

// A block forward from its pieces, merged by LSE into out [b, sq, hq, dv] and
// lse [b, hq, sq] (f32, replaced; a row no piece covers has out 0, lse -inf).
// q: [b, sq, hq, d], k: [b, sk, hk, d], v: [b, sk, hk, dv]. Returns the score
// entries computed (b hq per piece: sq sk, or the visible half of a causal one).
int64_t forward_by_pieces(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                          const PieceKernels& kernels, Tensor& out, Tensor& lse);
// A block backward from its pieces, added into the f32 accumulators dq
// [b, sq, hq, d], dk [b, sk, hk, d] and dv [b, sk, hk, dv]; lse: the block's
// final [b, hq, sq].
int64_t backward_by_pieces(const Tensor& q, const Tensor& k, const Tensor& lse, const AttentionMask& mask,
                           const PieceKernels& kernels, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace sextant::ops
