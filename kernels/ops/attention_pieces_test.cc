#include "kernels/ops/attention_pieces.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness/compare.h"
#include "harness/rng.h"

namespace sextant::ops {
namespace {

// Every visible pair covered once, nothing else covered; causal pieces square.
void expect_exact_cover(const AttentionMask& mask, int64_t sq, int64_t sk, const std::string& what) {
  std::vector<int> covered(static_cast<size_t>(sq * sk), 0);
  for (const AttentionPiece& p : attention_pieces(mask, sq, sk)) {
    ASSERT_TRUE(p.q0 >= 0 && p.sq > 0 && p.q0 + p.sq <= sq && p.k0 >= 0 && p.sk > 0 && p.k0 + p.sk <= sk) << what;
    if (p.causal) {
      ASSERT_EQ(p.sq, p.sk) << what;
      ASSERT_GT(p.sq, 1) << what;  // cuDNN takes no causal mask on one row
    }
    for (int64_t i = 0; i < p.sq; ++i)
      for (int64_t j = 0; j < p.sk; ++j)
        if (!p.causal || j <= i) ++covered[static_cast<size_t>((p.q0 + i) * sk + p.k0 + j)];
  }
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j)
      ASSERT_EQ(covered[static_cast<size_t>(i * sk + j)],
                key_visible(mask, static_cast<size_t>(i), static_cast<size_t>(j)) ? 1 : 0)
          << what << " query " << i << " key " << j;
}

TEST(AttentionPieces, NoMaskAndWholeDiagonalAreOnePiece) {
  EXPECT_EQ(attention_pieces(AttentionMask::none(), 5, 7), (std::vector<AttentionPiece>{{0, 5, 0, 7, false}}));
  EXPECT_EQ(attention_pieces(AttentionMask::causal_blocks(0, 6, 0, 6), 6, 6),
            (std::vector<AttentionPiece>{{0, 6, 0, 6, true}}));
  EXPECT_TRUE(attention_pieces(AttentionMask::causal_blocks(0, 4, 10, 4), 4, 4).empty());  // keys all later
  EXPECT_EQ(attention_pieces(AttentionMask::causal_blocks(10, 4, 0, 4), 4, 4),
            (std::vector<AttentionPiece>{{0, 4, 0, 4, false}}));
}

// Zigzag shards: member r holds chunks r and 2P-1-r. Each ring step is one
// piece: the diagonal, the lower half of the keys, or the upper half of the
// queries.
TEST(AttentionPieces, ZigzagRingStepsAreOnePieceEach) {
  const int members = 4;
  const int64_t chunk = 3;
  auto rows_of = [&](int r) {
    std::vector<int64_t> pos;
    for (int64_t c : {static_cast<int64_t>(r), static_cast<int64_t>(2 * members - 1 - r)})
      for (int64_t x = 0; x < chunk; ++x) pos.push_back(c * chunk + x);
    return pos;
  };
  for (int me = 0; me < members; ++me)
    for (int src = 0; src < members; ++src) {
      const AttentionMask mask = AttentionMask::causal_positions(rows_of(me), rows_of(src));
      const std::string what = "member " + std::to_string(me) + " keys of " + std::to_string(src);
      expect_exact_cover(mask, 2 * chunk, 2 * chunk, what);
      const std::vector<AttentionPiece> pieces = attention_pieces(mask, 2 * chunk, 2 * chunk);
      ASSERT_EQ(pieces.size(), 1u) << what;
      if (me == src) EXPECT_EQ(pieces[0], (AttentionPiece{0, 2 * chunk, 0, 2 * chunk, true})) << what;
      else if (src < me) EXPECT_EQ(pieces[0], (AttentionPiece{0, 2 * chunk, 0, chunk, false})) << what;
      else EXPECT_EQ(pieces[0], (AttentionPiece{chunk, chunk, 0, 2 * chunk, false})) << what;
    }
}

// Contiguous blocks at every offset, square and not.
TEST(AttentionPieces, CoverBlocksAtAnyOffset) {
  for (int64_t sq : {1, 4, 7})
    for (int64_t sk : {1, 5, 8})
      for (int64_t q_start = 0; q_start < 12; ++q_start)
        for (int64_t k_start = 0; k_start < 12; k_start += 3)
          expect_exact_cover(AttentionMask::causal_blocks(q_start, sq, k_start, sk), sq, sk,
                             "q at " + std::to_string(q_start) + " k at " + std::to_string(k_start));
}

// A sliding window's band, at every offset and of every width.
TEST(AttentionPieces, CoverSlidingWindows) {
  for (int64_t window : {0, 1, 3, 20})
    for (int64_t q_start = 0; q_start < 12; q_start += 2)
      for (int64_t k_start = 0; k_start < 12; k_start += 3)
        expect_exact_cover(AttentionMask::causal_blocks(q_start, 7, k_start, 5).with_window(Window::causal(window)), 7,
                           5,
                           "window " + std::to_string(window) + " q at " + std::to_string(q_start) + " k at " +
                               std::to_string(k_start));
  // Without a causal mask: both sides, and one side unbounded.
  for (Window w : {Window{0, 0}, Window{1, 3}, Window{3, 0}, Window{kNoWindow, 2}, Window{2, kNoWindow}})
    for (int64_t q_start = 0; q_start < 12; q_start += 2)
      for (int64_t k_start = 0; k_start < 12; k_start += 3) {
        AttentionMask m = AttentionMask::causal_blocks(q_start, 7, k_start, 5).with_window(w);
        m.causal = false;
        expect_exact_cover(m, 7, 5,
                           "window " + std::to_string(w.left) + "," + std::to_string(w.right) + " q at " +
                               std::to_string(q_start) + " k at " + std::to_string(k_start));
      }
  expect_exact_cover(AttentionMask::causal_packed({0, 1, 2, 3, 10, 11}, {0, 0, 0, 0, 10, 10}, {0, 1, 2, 3, 10, 11},
                                                  {0, 0, 0, 0, 10, 10})
                         .with_window(Window::causal(1)),
                     6, 6, "packed, window 1");
}

// Positions in any order (gathered from several ranks) and packed sequences
// with padding rows.
TEST(AttentionPieces, CoverScatteredAndPackedRows) {
  expect_exact_cover(AttentionMask::causal_positions({5, 6, 7, 0, 1, 2, 9}, {0, 1, 2, 3, 8, 9, 4, 5}), 7, 8,
                     "scattered");
  // Sampled rows against the whole sequence (the spot reference): rows of one.
  expect_exact_cover(AttentionMask::causal_positions({0, 5, 9}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), 3, 12,
                     "sampled rows");
  // Sequences named by their first position: 0 (rows 0-4), 5 (5-7), padding, 9 (9-12).
  const int64_t pad = AttentionMask::kPaddingRow;
  std::vector<int64_t> pos = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<int64_t> seq = {0, 0, 0, 0, 0, 5, 5, 5, pad, 9, 9, 9, 9};
  expect_exact_cover(AttentionMask::causal_packed(pos, seq, pos, seq), 13, 13, "packed, same rows");
  std::vector<int64_t> q_pos = {3, 4, 7, 8, 11, 12}, q_seq = {0, 0, 5, pad, 9, 9};
  expect_exact_cover(AttentionMask::causal_packed(q_pos, q_seq, pos, seq), 6, 13, "packed, a shard of the queries");
}

// The block from its pieces, with our host block kernel standing in for the
// fused library (own_piece_kernels), equals the block computed whole: the
// pieces, the merge at row offsets and the gradient accumulation are what
// attention_cudnn.cc runs.
std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

double rel(const Tensor& x, const Tensor& ref) { return compare(x, ref).rel_l2; }

void expect_pieces_make_the_block(const AttentionMask& mask, int64_t sq, int64_t sk, const std::string& what) {
  SCOPED_TRACE(what);
  const int64_t b = 2, hq = 4, hk = 2, d = 16;
  const Tensor q = random_tensor({b, sq, hq, d}, DType::f32, {3, tensor_id("q"), 2.0});
  const Tensor k = random_tensor({b, sk, hk, d}, DType::f32, {3, tensor_id("k"), 2.0});
  const Tensor v = random_tensor({b, sk, hk, d}, DType::f32, {3, tensor_id("v")});
  const Tensor dout = random_tensor({b, sq, hq, d}, DType::f32, {3, tensor_id("dout")});
  const AttentionOut whole = attention_block_forward(q, k, v, mask);
  Tensor out, lse;
  forward_by_pieces(q, k, v, mask, own_piece_kernels(q, k, v, whole.out, dout), out, lse);
  // Rows that see nothing: out 0 and lse -inf on both sides.
  for (int64_t i = 0; i < lse.numel(); ++i)
    ASSERT_EQ(lse.at(i) == -INFINITY, whole.lse.at(i) == -INFINITY) << "lse entry " << i;
  Tensor lse_finite = lse.clone(), whole_finite = whole.lse.clone();
  for (int64_t i = 0; i < lse.numel(); ++i)
    if (whole.lse.at(i) == -INFINITY) lse_finite.set(i, 0.0), whole_finite.set(i, 0.0);
  EXPECT_LT(rel(out, whole.out), 1e-6);
  EXPECT_LT(rel(lse_finite, whole_finite), 1e-6);
  const AttentionGrads g = attention_block_backward(q, k, v, whole.out, whole.lse, dout, mask);
  Tensor dq = Tensor::zeros(q.shape(), DType::f32), dk = Tensor::zeros(k.shape(), DType::f32), dv = dk.clone();
  backward_by_pieces(q, k, whole.lse, mask, own_piece_kernels(q, k, v, whole.out, dout), dq, dk, dv);
  EXPECT_LT(rel(dq, g.dq), 1e-5);
  EXPECT_LT(rel(dk, g.dk), 1e-5);
  EXPECT_LT(rel(dv, g.dv), 1e-5);
}

TEST(AttentionPieces, PiecesMakeTheBlock) {
  const int64_t chunk = 8;
  std::vector<int64_t> zigzag, rank1;
  for (int64_t x = 0; x < chunk; ++x) zigzag.push_back(x), rank1.push_back(chunk + x);
  for (int64_t x = 0; x < chunk; ++x) zigzag.push_back(3 * chunk + x), rank1.push_back(2 * chunk + x);
  expect_pieces_make_the_block(AttentionMask::none(), 24, 40, "no mask");
  expect_pieces_make_the_block(AttentionMask::causal_blocks(0, 30, 0, 30), 30, 30, "causal");
  expect_pieces_make_the_block(AttentionMask::causal_positions(zigzag, zigzag), 16, 16, "zigzag diagonal step");
  expect_pieces_make_the_block(AttentionMask::causal_positions(zigzag, rank1), 16, 16, "zigzag, later keys");
  expect_pieces_make_the_block(AttentionMask::causal_positions(rank1, zigzag), 16, 16, "zigzag, earlier keys");
  expect_pieces_make_the_block(AttentionMask::causal_blocks(10, 20, 0, 25), 20, 25, "block at an offset");
  expect_pieces_make_the_block(AttentionMask::causal_blocks(0, 20, 12, 20), 20, 20, "keys later than most rows");
  expect_pieces_make_the_block(AttentionMask::causal_positions({0, 5, 9, 17}, iota(20)), 4, 20, "sampled rows");
  expect_pieces_make_the_block(AttentionMask::causal_blocks(0, 1, 0, 1), 1, 1, "one row, one key");
  const int64_t pad = AttentionMask::kPaddingRow;
  std::vector<int64_t> pos, seq;
  for (int64_t x = 0; x < 26; ++x) pos.push_back(x), seq.push_back(x < 9 ? 0 : x < 12 ? pad : 12);
  expect_pieces_make_the_block(AttentionMask::causal_packed(pos, seq, pos, seq), 26, 26, "packed with padding");
}

}  // namespace
}  // namespace sextant::ops
