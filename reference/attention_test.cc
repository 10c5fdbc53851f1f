#include "reference/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "harness/strings.h"

namespace sextant::ref {
namespace {

struct Inputs {
  Tensor q, k, v, dout;
};

// q [b, s, hq, d]; k [b, s, hk, d]; v [b, s, hk, dv]; dout [b, s, hq, dv], f64
// (dv 0: d).
Inputs make_inputs(int64_t b, int64_t s, int64_t hq, int64_t hk, int64_t d, uint64_t seed = 3, int64_t dv = 0) {
  if (dv == 0) dv = d;
  return {random_tensor({b, s, hq, d}, DType::f64, {seed, tensor_id("q"), 1.5}),
          random_tensor({b, s, hk, d}, DType::f64, {seed, tensor_id("k"), 1.5}),
          random_tensor({b, s, hk, dv}, DType::f64, {seed, tensor_id("v")}),
          random_tensor({b, s, hq, dv}, DType::f64, {seed, tensor_id("dout")})};
}

// The scalar whose gradients the backward returns: L = sum(dout * out).
double loss(const Inputs& x, bool causal, Window window = {}) {
  Tensor out = attention_forward(x.q, x.k, x.v, causal, window).out;
  double sum = 0;
  for (int64_t i = 0; i < out.numel(); ++i) sum += out.at(i) * x.dout.at(i);
  return sum;
}

// Central differences of L against every element of one input.
Tensor numeric_grad(Inputs x, Tensor Inputs::*which, bool causal, Window window = {}) {
  const double h = 1e-5;
  Tensor& t = x.*which;
  t = t.clone();
  Tensor g = Tensor::zeros(t.shape(), DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double keep = t.at(i);
    t.set(i, keep + h);
    const double up = loss(x, causal, window);
    t.set(i, keep - h);
    const double down = loss(x, causal, window);
    t.set(i, keep);
    g.set(i, (up - down) / (2 * h));
  }
  return g;
}

TEST(ReferenceAttention, BackwardMatchesFiniteDifferences) {
  for (bool causal : {false, true}) {
    const Inputs x = make_inputs(2, 5, 4, 2, 3);  // GQA: two query heads per kv head
    AttentionGradients g = attention_backward(x.q, x.k, x.v, x.dout, causal);
    EXPECT_LT(compare(g.dq, numeric_grad(x, &Inputs::q, causal)).rel_l2, 1e-8) << "causal=" << causal;
    EXPECT_LT(compare(g.dk, numeric_grad(x, &Inputs::k, causal)).rel_l2, 1e-8) << "causal=" << causal;
    EXPECT_LT(compare(g.dv, numeric_grad(x, &Inputs::v, causal)).rel_l2, 1e-8) << "causal=" << causal;
  }
}

// Sliding windows, causal (2 keys back) and not (2 back, 1 ahead; 0 back,
// 2 ahead).
TEST(ReferenceAttention, WindowedBackwardMatchesFiniteDifferences) {
  const Inputs x = make_inputs(1, 6, 2, 1, 3, 7);
  for (auto [causal, window] : {std::pair{true, Window{2}}, {false, Window{2, 1}}, {false, Window{0, 2}}}) {
    const AttentionGradients g = attention_backward(x.q, x.k, x.v, x.dout, causal, window);
    const std::string what = cat("causal ", causal, " window ", window.left, ",", window.right);
    EXPECT_LT(compare(g.dq, numeric_grad(x, &Inputs::q, causal, window)).rel_l2, 1e-8) << what;
    EXPECT_LT(compare(g.dk, numeric_grad(x, &Inputs::k, causal, window)).rel_l2, 1e-8) << what;
    EXPECT_LT(compare(g.dv, numeric_grad(x, &Inputs::v, causal, window)).rel_l2, 1e-8) << what;
    const AttentionRows rows = attention_rows(x.q, x.k, x.v, x.dout, causal, {0, 5}, window);
    const AttentionResult f = attention_forward(x.q, x.k, x.v, causal, window);
    EXPECT_LT(compare(narrow(rows.out, 1, 1, 1), narrow(f.out, 1, 5, 1)).max_abs, 1e-15) << what;
  }
  EXPECT_THROW(attention_forward(x.q, x.k, x.v, true, {2, 1}), RuntimeError);  // a causal mask sees nothing ahead
}

// MLA: q/k head dim 3, v head dim 2 (and 5: wider values than queries).
TEST(ReferenceAttention, DifferentValueHeadDimMatchesFiniteDifferences) {
  for (int64_t dv : {2, 5}) {
    const Inputs x = make_inputs(1, 4, 2, 1, 3, 5, dv);
    const AttentionResult f = attention_forward(x.q, x.k, x.v, true);
    EXPECT_EQ(f.out.shape(), (Shape{1, 4, 2, dv}));
    AttentionGradients g = attention_backward(x.q, x.k, x.v, x.dout, true);
    EXPECT_EQ(g.dv.shape(), x.v.shape());
    EXPECT_LT(compare(g.dq, numeric_grad(x, &Inputs::q, true)).rel_l2, 1e-8) << "dv=" << dv;
    EXPECT_LT(compare(g.dk, numeric_grad(x, &Inputs::k, true)).rel_l2, 1e-8) << "dv=" << dv;
    EXPECT_LT(compare(g.dv, numeric_grad(x, &Inputs::v, true)).rel_l2, 1e-8) << "dv=" << dv;
    const AttentionRows rows = attention_rows(x.q, x.k, x.v, x.dout, true, {0, 3});
    EXPECT_LT(compare(narrow(rows.out, 1, 1, 1), narrow(f.out, 1, 3, 1)).max_abs, 1e-15);
    EXPECT_LT(compare(narrow(rows.dq, 1, 1, 1), narrow(g.dq, 1, 3, 1)).max_abs, 1e-12);
  }
  const Inputs x = make_inputs(1, 4, 2, 1, 3, 5, 2);
  EXPECT_THROW(attention_backward(x.q, x.k, x.v, x.q, true), RuntimeError);  // dout shaped like q, not out
}

TEST(ReferenceAttention, SmallCasesByHand) {
  // One key: every query returns that key's value, LSE = q.k / sqrt(d).
  Tensor q = Tensor::from_values({1, 1, 1, 4}, {1, 2, 3, 4}, DType::f64);
  Tensor k = Tensor::from_values({1, 1, 1, 4}, {1, 0, 1, 0}, DType::f64);
  Tensor v = Tensor::from_values({1, 1, 1, 4}, {5, 6, 7, 8}, DType::f64);
  AttentionResult r = attention_forward(q, k, v, false);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(r.out.at(i), v.at(i));
  EXPECT_DOUBLE_EQ(r.lse.at(0), 4.0 / 2.0);
  // Two equal keys: uniform weights, LSE gains log 2; causal row 0 sees only key 0.
  Tensor q2 = Tensor::from_values({1, 2, 1, 1}, {1, 1}, DType::f64);
  Tensor k2 = Tensor::from_values({1, 2, 1, 1}, {1, 1}, DType::f64);
  Tensor v2 = Tensor::from_values({1, 2, 1, 1}, {2, 4}, DType::f64);
  AttentionResult full = attention_forward(q2, k2, v2, false);
  EXPECT_DOUBLE_EQ(full.out.at(0), 3.0);
  EXPECT_NEAR(full.lse.at(0), 1.0 + std::log(2.0), 1e-15);
  AttentionResult causal = attention_forward(q2, k2, v2, true);
  EXPECT_DOUBLE_EQ(causal.out.at(0), 2.0);
  EXPECT_DOUBLE_EQ(causal.out.at(1), 3.0);
  EXPECT_DOUBLE_EQ(causal.lse.at(0), 1.0);
  // A window of no key either side: each query sees its own key only.
  AttentionResult self = attention_forward(q2, k2, v2, false, {0, 0});
  EXPECT_DOUBLE_EQ(self.out.at(0), 2.0);
  EXPECT_DOUBLE_EQ(self.out.at(1), 4.0);
  EXPECT_DOUBLE_EQ(self.lse.at(1), 1.0);
  // One key ahead, none behind: row 0 sees both keys, row 1 its own.
  AttentionResult ahead = attention_forward(q2, k2, v2, false, {0, 1});
  EXPECT_DOUBLE_EQ(ahead.out.at(0), 3.0);
  EXPECT_DOUBLE_EQ(ahead.out.at(1), 4.0);
}

TEST(ReferenceAttention, GroupedQueryEqualsRepeatedKvHeads) {
  const Inputs x = make_inputs(1, 6, 4, 2, 3);
  // MHA with each kv head repeated for its two query heads.
  Tensor k4 = Tensor::zeros({1, 6, 4, 3}, DType::f64), v4 = Tensor::zeros({1, 6, 4, 3}, DType::f64);
  for (int64_t j = 0; j < 6; ++j)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t e = 0; e < 3; ++e) {
        k4.set((j * 4 + h) * 3 + e, x.k.at((j * 2 + h / 2) * 3 + e));
        v4.set((j * 4 + h) * 3 + e, x.v.at((j * 2 + h / 2) * 3 + e));
      }
  for (bool causal : {false, true}) {
    EXPECT_EQ(compare(attention_forward(x.q, x.k, x.v, causal).out, attention_forward(x.q, k4, v4, causal).out).max_abs,
              0.0);
    AttentionGradients g = attention_backward(x.q, x.k, x.v, x.dout, causal);
    AttentionGradients g4 = attention_backward(x.q, k4, v4, x.dout, causal);
    EXPECT_LT(compare(g.dq, g4.dq).max_abs, 1e-15);
    // dk of kv head g = sum of the repeated heads' dk.
    for (int64_t j = 0; j < 6; ++j)
      for (int64_t kvh = 0; kvh < 2; ++kvh)
        for (int64_t e = 0; e < 3; ++e)
          EXPECT_NEAR(g.dk.at((j * 2 + kvh) * 3 + e),
                      g4.dk.at((j * 4 + 2 * kvh) * 3 + e) + g4.dk.at((j * 4 + 2 * kvh + 1) * 3 + e), 1e-14);
  }
}

TEST(ReferenceAttention, RowsEqualTheWholeReference) {
  const Inputs x = make_inputs(2, 9, 2, 1, 4);
  const std::vector<int64_t> rows = {0, 3, 8};
  for (bool causal : {false, true}) {
    AttentionResult whole = attention_forward(x.q, x.k, x.v, causal);
    AttentionGradients grads = attention_backward(x.q, x.k, x.v, x.dout, causal);
    AttentionRows r = attention_rows(x.q, x.k, x.v, x.dout, causal, rows);
    for (int64_t b = 0; b < 2; ++b)
      for (size_t ri = 0; ri < rows.size(); ++ri)
        for (int64_t h = 0; h < 2; ++h) {
          EXPECT_NEAR(r.lse.at((b * 2 + h) * 3 + ri), whole.lse.at((b * 2 + h) * 9 + rows[ri]), 1e-14);
          for (int64_t e = 0; e < 4; ++e) {
            const int64_t mine = ((b * 3 + ri) * 2 + h) * 4 + e, full = ((b * 9 + rows[ri]) * 2 + h) * 4 + e;
            EXPECT_NEAR(r.out.at(mine), whole.out.at(full), 1e-14);
            EXPECT_NEAR(r.dq.at(mine), grads.dq.at(full), 1e-14);
          }
        }
  }
}

}  // namespace
}  // namespace sextant::ref
