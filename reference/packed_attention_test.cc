#include "reference/packed_attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"

namespace sextant::ref {
namespace {

struct Inputs {
  Tensor q, k, v, dout;
};

Inputs make_inputs(int64_t b, int64_t s, int64_t hq, int64_t hk, int64_t d) {
  return {random_tensor({b, s, hq, d}, DType::f64, {5, tensor_id("q"), 1.5}),
          random_tensor({b, s, hk, d}, DType::f64, {5, tensor_id("k"), 1.5}),
          random_tensor({b, s, hk, d}, DType::f64, {5, tensor_id("v")}),
          random_tensor({b, s, hq, d}, DType::f64, {5, tensor_id("dout")})};
}

double dot(const Tensor& a, const Tensor& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.numel(); ++i) sum += a.at(i) * b.at(i);
  return sum;
}

// The first row of every sequence sees only itself: out = its value row and
// lse = q.k / sqrt(d), whatever came before it in the pack.
TEST(ReferencePackedAttention, FirstRowOfEverySequenceSeesOnlyItself) {
  const Inputs x = make_inputs(1, 9, 1, 1, 4);
  const AttentionResult r = packed_attention_forward(x.q, x.k, x.v, {4, 2, 3});
  for (int64_t first : {0, 4, 6}) {
    double qk = 0;
    for (int64_t e = 0; e < 4; ++e) {
      EXPECT_DOUBLE_EQ(r.out.at(first * 4 + e), x.v.at(first * 4 + e)) << first;
      qk += x.q.at(first * 4 + e) * x.k.at(first * 4 + e);
    }
    EXPECT_NEAR(r.lse.at(first), qk / 2.0, 1e-14) << first;
  }
}

// One sequence is the causal whole; a later sequence does not depend on an
// earlier one (changing the first sequence's keys leaves it unchanged).
TEST(ReferencePackedAttention, SequencesAreIndependent) {
  Inputs x = make_inputs(2, 10, 2, 1, 3);
  const AttentionResult whole = attention_forward(x.q, x.k, x.v, true);
  EXPECT_EQ(compare(packed_attention_forward(x.q, x.k, x.v, {10}).out, whole.out).max_abs, 0.0);
  const AttentionResult before = packed_attention_forward(x.q, x.k, x.v, {6, 4});
  for (int64_t i = 0; i < 6 * 3; ++i) x.k.set(i, 9.0);  // batch 0, rows 0..5 of the only kv head
  const AttentionResult after = packed_attention_forward(x.q, x.k, x.v, {6, 4});
  for (int64_t row = 6; row < 10; ++row)
    for (int64_t e = 0; e < 2 * 3; ++e) EXPECT_EQ(after.out.at(row * 6 + e), before.out.at(row * 6 + e)) << row;
}

// A sliding window within each sequence: each sequence is the windowed
// causal attention of its own rows (the window counts from its first row,
// never into the sequence before it).
TEST(ReferencePackedAttention, WindowsStayWithinEachSequence) {
  const Inputs x = make_inputs(1, 12, 2, 1, 3);
  const AttentionResult packed = packed_attention_forward(x.q, x.k, x.v, {5, 7}, 2);
  const AttentionGradients grads = packed_attention_backward(x.q, x.k, x.v, x.dout, {5, 7}, 2);
  const AttentionResult second =
      attention_forward(narrow(x.q, 1, 5, 7), narrow(x.k, 1, 5, 7), narrow(x.v, 1, 5, 7), true, {2});
  const AttentionGradients second_grads = attention_backward(narrow(x.q, 1, 5, 7), narrow(x.k, 1, 5, 7),
                                                             narrow(x.v, 1, 5, 7), narrow(x.dout, 1, 5, 7), true, {2});
  EXPECT_EQ(compare(narrow(packed.out, 1, 5, 7), second.out).max_abs, 0.0);
  EXPECT_EQ(compare(narrow(grads.dk, 1, 5, 7), second_grads.dk).max_abs, 0.0);
  const AttentionRows rows = packed_attention_rows(x.q, x.k, x.v, x.dout, {5, 7}, {4, 9}, 2);
  EXPECT_EQ(compare(narrow(rows.out, 1, 1, 1), narrow(packed.out, 1, 9, 1)).max_abs, 0.0);
  EXPECT_GT(compare(packed.out, packed_attention_forward(x.q, x.k, x.v, {5, 7}).out).max_abs, 0.0);  // it masks
}

// The backward is the gradient of L = sum(dout * out), by central differences.
TEST(ReferencePackedAttention, BackwardMatchesFiniteDifferences) {
  const Inputs x = make_inputs(1, 7, 2, 1, 3);
  const std::vector<int64_t> lens = {3, 1, 3};
  const AttentionGradients g = packed_attention_backward(x.q, x.k, x.v, x.dout, lens);
  auto numeric = [&](Tensor Inputs::*which) {
    Inputs y = x;
    Tensor& t = y.*which;
    t = t.clone();
    Tensor out = Tensor::zeros(t.shape(), DType::f64);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double keep = t.at(i), h = 1e-5;
      t.set(i, keep + h);
      const double up = dot(packed_attention_forward(y.q, y.k, y.v, lens).out, y.dout);
      t.set(i, keep - h);
      const double down = dot(packed_attention_forward(y.q, y.k, y.v, lens).out, y.dout);
      t.set(i, keep);
      out.set(i, (up - down) / (2 * h));
    }
    return out;
  };
  EXPECT_LT(compare(g.dq, numeric(&Inputs::q)).rel_l2, 1e-8);
  EXPECT_LT(compare(g.dk, numeric(&Inputs::k)).rel_l2, 1e-8);
  EXPECT_LT(compare(g.dv, numeric(&Inputs::v)).rel_l2, 1e-8);
}

TEST(ReferencePackedAttention, RowsEqualThePackedWhole) {
  const Inputs x = make_inputs(1, 8, 1, 1, 2);
  const std::vector<int64_t> lens = {5, 3}, rows = {0, 4, 5, 7};
  const AttentionResult whole = packed_attention_forward(x.q, x.k, x.v, lens);
  const AttentionGradients grads = packed_attention_backward(x.q, x.k, x.v, x.dout, lens);
  const AttentionRows r = packed_attention_rows(x.q, x.k, x.v, x.dout, lens, rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_NEAR(r.lse.at(static_cast<int64_t>(i)), whole.lse.at(rows[i]), 1e-14);
    for (int64_t e = 0; e < 2; ++e) {
      EXPECT_NEAR(r.out.at(static_cast<int64_t>(i) * 2 + e), whole.out.at(rows[i] * 2 + e), 1e-14);
      EXPECT_NEAR(r.dq.at(static_cast<int64_t>(i) * 2 + e), grads.dq.at(rows[i] * 2 + e), 1e-14);
    }
  }
}

TEST(ReferencePackedAttention, RejectsLengthsThatDoNotTileTheRows) {
  const Inputs x = make_inputs(1, 6, 1, 1, 2);
  EXPECT_THROW(packed_attention_forward(x.q, x.k, x.v, {3, 2}), RuntimeError);
  EXPECT_THROW(packed_attention_forward(x.q, x.k, x.v, {7, -1}), RuntimeError);
  // A sequence of no tokens takes no rows: {2, 0, 4} is {2, 4}.
  const AttentionResult with_empty = packed_attention_forward(x.q, x.k, x.v, {2, 0, 4});
  const AttentionResult without = packed_attention_forward(x.q, x.k, x.v, {2, 4});
  EXPECT_EQ(with_empty.out.to_vector(), without.out.to_vector());
}

}  // namespace
}  // namespace sextant::ref
