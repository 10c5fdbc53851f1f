// The attention block on packed variable-length sequences (THD): sequence
// names per row, padding rows, and blocks of a sharded pack, against the
// float64 reference that computes every sequence on its own.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "kernels/ops/attention_block.h"
#include "reference/packed_attention.h"

namespace sextant::ops {
namespace {

constexpr int64_t kPad = AttentionMask::kPaddingRow;

// A pack of sequences, each followed by padding rows: the positions of the
// stream and the sequence name of every row (its first row, or kPad).
struct Pack {
  std::vector<int64_t> lengths, padded;
  std::vector<int64_t> pos, seq;
  std::vector<int64_t> real_rows;  // stream rows that hold tokens, in order
  int64_t rows() const { return static_cast<int64_t>(pos.size()); }
};

Pack make_pack(std::vector<int64_t> lengths, std::vector<int64_t> padded) {
  Pack p{std::move(lengths), std::move(padded), {}, {}, {}};
  int64_t at = 0;
  for (size_t i = 0; i < p.lengths.size(); ++i) {
    for (int64_t j = 0; j < p.padded[i]; ++j) {
      p.pos.push_back(at + j);
      p.seq.push_back(j < p.lengths[i] ? at : kPad);
      if (j < p.lengths[i]) p.real_rows.push_back(at + j);
    }
    at += p.padded[i];
  }
  return p;
}

Tensor rows_of(const Tensor& t, int dim, const std::vector<int64_t>& rows) {
  std::vector<Tensor> parts;
  for (int64_t r : rows) parts.push_back(narrow(t, dim, r, 1));
  return concat(parts, dim);
}

struct Inputs {
  Tensor q, k, v, dout;
};
Inputs make_inputs(int64_t s, int64_t hq, int64_t hk, int64_t d) {
  return {random_tensor({1, s, hq, d}, DType::f32, {11, tensor_id("q"), 2.0}),
          random_tensor({1, s, hk, d}, DType::f32, {11, tensor_id("k"), 2.0}),
          random_tensor({1, s, hk, d}, DType::f32, {11, tensor_id("v")}),
          random_tensor({1, s, hq, d}, DType::f32, {11, tensor_id("dout")})};
}

double err(const Tensor& x, const Tensor& ref) { return compare(x, ref).rel_l2; }

bool all_zero(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.at(i) != 0.0) return false;
  return true;
}

// Sequences longer than a tile and shorter, with padding between them.
TEST(AttentionBlockPacked, EverySequenceAttendsToItselfAlone) {
  const Pack p = make_pack({5, 300, 3, 140}, {8, 304, 8, 144});
  const Inputs x = make_inputs(p.rows(), 4, 2, 16);
  const AttentionMask mask = AttentionMask::causal_packed(p.pos, p.seq, p.pos, p.seq);
  const AttentionOut f = attention_block_forward(x.q, x.k, x.v, mask);
  const AttentionGrads g = attention_block_backward(x.q, x.k, x.v, f.out, f.lse, x.dout, mask);

  const Tensor q = rows_of(x.q, 1, p.real_rows), k = rows_of(x.k, 1, p.real_rows), v = rows_of(x.v, 1, p.real_rows);
  const Tensor dout = rows_of(x.dout, 1, p.real_rows);
  const ref::AttentionResult rf = ref::packed_attention_forward(q, k, v, p.lengths);
  const ref::AttentionGradients rg = ref::packed_attention_backward(q, k, v, dout, p.lengths);
  EXPECT_LT(err(rows_of(f.out, 1, p.real_rows), rf.out), 2e-6);
  EXPECT_LT(err(rows_of(f.lse, 2, p.real_rows), rf.lse), 2e-6);
  EXPECT_LT(err(rows_of(g.dq, 1, p.real_rows), rg.dq), 1e-5);
  EXPECT_LT(err(rows_of(g.dk, 1, p.real_rows), rg.dk), 1e-5);
  EXPECT_LT(err(rows_of(g.dv, 1, p.real_rows), rg.dv), 1e-5);

  // Padding rows: out 0 and lse -inf as queries, no gradient as keys.
  for (int64_t r = 0; r < p.rows(); ++r) {
    if (p.seq[r] != kPad) continue;
    EXPECT_TRUE(all_zero(narrow(f.out, 1, r, 1))) << r;
    for (int64_t h = 0; h < 4; ++h) EXPECT_EQ(f.lse.at(h * p.rows() + r), -INFINITY) << r;
    for (const Tensor* t : {&g.dq, &g.dk, &g.dv}) EXPECT_TRUE(all_zero(narrow(*t, 1, r, 1))) << r;
  }
  // Tiles across sequences are skipped: far fewer scores than one causal sequence.
  const int64_t pairs = 5 * 6 / 2 + 300 * 301 / 2 + 3 * 4 / 2 + 140 * 141 / 2;
  EXPECT_EQ(visible_pairs(mask, p.rows(), p.rows()), pairs);
  EXPECT_LT(f.scores, 4 * p.rows() * (p.rows() + 1) / 2);
}

// A per-sequence zigzag shard (cp 2: chunks 0 and 3 of every sequence) as
// queries against the whole pack: the same rows as the packed whole.
TEST(AttentionBlockPacked, ShardOfEverySequenceMasksLikeTheWhole) {
  const Pack p = make_pack({24, 8, 32}, {24, 8, 32});
  const Inputs x = make_inputs(p.rows(), 2, 2, 8);
  std::vector<int64_t> rows;
  int64_t at = 0;
  for (int64_t n : p.padded) {
    const int64_t c = n / 4;
    for (int64_t chunk : {int64_t{0}, int64_t{3}})
      for (int64_t j = 0; j < c; ++j) rows.push_back(at + chunk * c + j);
    at += n;
  }
  std::vector<int64_t> q_seq;
  for (int64_t r : rows) q_seq.push_back(p.seq[r]);
  const AttentionMask mask = AttentionMask::causal_packed(rows, q_seq, p.pos, p.seq);
  const Tensor q = rows_of(x.q, 1, rows), dout = rows_of(x.dout, 1, rows);
  const AttentionOut f = attention_block_forward(q, x.k, x.v, mask);
  Tensor dq = Tensor::zeros(q.shape(), DType::f32), dk = Tensor::zeros(x.k.shape(), DType::f32),
         dv = Tensor::zeros(x.k.shape(), DType::f32);
  attention_block_backward_accumulate(q, x.k, x.v, f.out, dout, f.lse, attention_delta(f.out, dout), mask, dq, dk, dv);
  const ref::AttentionRows r = ref::packed_attention_rows(x.q, x.k, x.v, x.dout, p.lengths, rows);
  EXPECT_LT(err(f.out, r.out), 2e-6);
  EXPECT_LT(err(f.lse, r.lse), 2e-6);
  // dq of these rows needs only their own rows of dout: the rows' reference.
  EXPECT_LT(err(dq, r.dq), 1e-5);
}

TEST(AttentionBlockPacked, VisibilityFollowsSequences) {
  // Queries of sequence 8 (rows 8..11) against keys of sequence 0: nothing.
  const std::vector<int64_t> q_pos = {8, 9, 10, 11}, k_pos = {4, 5, 6, 7};
  EXPECT_EQ(visibility(AttentionMask::causal_packed(q_pos, {8, 8, 8, 8}, k_pos, {0, 0, 0, 0})), Visibility::none);
  EXPECT_EQ(visibility(AttentionMask::causal_packed(q_pos, {4, 4, 4, 4}, k_pos, {4, 4, 4, 4})), Visibility::full);
  EXPECT_EQ(visibility(AttentionMask::causal_packed(q_pos, {4, 4, 4, 4}, k_pos, {4, 4, 4, kPad})), Visibility::partial);
  EXPECT_EQ(visible_pairs(AttentionMask::causal_packed(q_pos, {4, 4, kPad, 4}, k_pos, {4, 4, 4, kPad}), 4, 4), 9);
  EXPECT_FALSE(key_visible(AttentionMask::causal_packed({5}, {5}, {4}, {0}), 0, 0));
  EXPECT_TRUE(key_visible(AttentionMask::causal_packed({5}, {4}, {4}, {4}), 0, 0));
}

TEST(AttentionBlockPacked, RejectsSequenceNamesThatDoNotFit) {
  const Inputs x = make_inputs(4, 1, 1, 4);
  AttentionMask m = AttentionMask::causal_packed({0, 1, 2, 3}, {0, 0, 0}, {0, 1, 2, 3}, {0, 0, 0, 0});
  EXPECT_THROW(attention_block_forward(x.q, x.k, x.v, m), RuntimeError);
  m = AttentionMask::causal_packed({0, 1, 2, 3}, {0, 0, 0, 0}, {0, 1, 2, 3}, {0, 0, 0, 0});
  m.causal = false;
  EXPECT_THROW(attention_block_forward(x.q, x.k, x.v, m), RuntimeError);
}

}  // namespace
}  // namespace sextant::ops
