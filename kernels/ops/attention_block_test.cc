#include "kernels/ops/attention_block.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "reference/attention.h"

namespace sextant::ops {
namespace {

struct Inputs {
  Tensor q, k, v, dout;
};

// q [b, s, hq, d]; k [b, sk, hk, d]; v [b, sk, hk, dv]; dout [b, s, hq, dv]
// in dtype (sk 0: s; dv 0: d).
Inputs make_inputs(DType dt, int64_t b, int64_t s, int64_t hq, int64_t hk, int64_t d, int64_t sk = 0, int64_t dv = 0) {
  sk = sk ? sk : s;
  dv = dv ? dv : d;
  return {random_tensor({b, s, hq, d}, dt, {7, tensor_id("q"), 2.0}),
          random_tensor({b, sk, hk, d}, dt, {7, tensor_id("k"), 2.0}),
          random_tensor({b, sk, hk, dv}, dt, {7, tensor_id("v")}),
          random_tensor({b, s, hq, dv}, dt, {7, tensor_id("dout")})};
}

AttentionMask mask_for(bool causal, int64_t s) {
  return causal ? AttentionMask::causal_blocks(0, s, 0, s) : AttentionMask::none();
}

double err(const Tensor& x, const Tensor& ref) { return compare(x, ref).rel_l2; }

// Whole-sequence attention against the float64 reference, forward and
// backward, at sizes that are not multiples of the tiles (partial tiles), MHA
// and GQA, causal or not.
TEST(AttentionBlock, MatchesTheReference) {
  struct Case {
    int64_t b, s, hq, hk, d;
  };
  for (Case c : {Case{1, 7, 1, 1, 4}, Case{2, 200, 4, 2, 16}, Case{1, 300, 2, 1, 64}})
    for (bool causal : {false, true}) {
      const Inputs x = make_inputs(DType::f32, c.b, c.s, c.hq, c.hk, c.d);
      AttentionOut f = attention_block_forward(x.q, x.k, x.v, mask_for(causal, c.s));
      AttentionGrads g = attention_block_backward(x.q, x.k, x.v, f.out, f.lse, x.dout, mask_for(causal, c.s));
      ref::AttentionResult rf = ref::attention_forward(x.q, x.k, x.v, causal);
      ref::AttentionGradients rg = ref::attention_backward(x.q, x.k, x.v, x.dout, causal);
      const std::string what = "s=" + std::to_string(c.s) + " causal=" + std::to_string(causal);
      EXPECT_LT(err(f.out, rf.out), 2e-6) << what;
      EXPECT_LT(err(f.lse, rf.lse), 2e-6) << what;
      EXPECT_LT(err(g.dq, rg.dq), 1e-5) << what;
      EXPECT_LT(err(g.dk, rg.dk), 1e-5) << what;
      EXPECT_LT(err(g.dv, rg.dv), 1e-5) << what;
    }
}

// A causal sliding window against the float64 reference: windows of 0 (a
// query sees itself only), narrower than a tile, across tile edges and
// wider than the sequence (the plain causal mask); the tiles before every
// window are skipped, so fewer scores are computed than causal alone needs.
TEST(AttentionBlock, SlidingWindowMatchesTheReference) {
  const int64_t s = 300;
  const Inputs x = make_inputs(DType::f32, 1, s, 4, 2, 16);
  const AttentionOut causal = attention_block_forward(x.q, x.k, x.v, mask_for(true, s));
  for (int64_t window : {0, 5, 63, 64, 130, 400}) {
    const AttentionMask mask = mask_for(true, s).with_window(Window::causal(window));
    AttentionOut f = attention_block_forward(x.q, x.k, x.v, mask);
    AttentionGrads g = attention_block_backward(x.q, x.k, x.v, f.out, f.lse, x.dout, mask);
    ref::AttentionResult rf = ref::attention_forward(x.q, x.k, x.v, true, {window});
    ref::AttentionGradients rg = ref::attention_backward(x.q, x.k, x.v, x.dout, true, {window});
    const std::string what = "window=" + std::to_string(window);
    EXPECT_LT(err(f.out, rf.out), 2e-6) << what;
    EXPECT_LT(err(f.lse, rf.lse), 2e-6) << what;
    EXPECT_LT(err(g.dq, rg.dq), 1e-5) << what;
    EXPECT_LT(err(g.dk, rg.dk), 1e-5) << what;
    EXPECT_LT(err(g.dv, rg.dv), 1e-5) << what;
    if (window < 130) {
      EXPECT_LT(f.scores, causal.scores) << what;
    }
    if (window >= s) {
      EXPECT_EQ(f.scores, causal.scores) << what;
    }
    // The mask's own count: a query at i sees min(i, window) + 1 keys.
    int64_t pairs = 0;
    for (int64_t i = 0; i < s; ++i) pairs += std::min(i, window) + 1;
    EXPECT_EQ(visible_pairs(mask, s, s), pairs) << what;
  }
  // Blocks of a sharded sequence: a key block wholly before a query block's window is hidden.
  EXPECT_EQ(visibility(AttentionMask::causal_blocks(100, 10, 0, 50).with_window(Window::causal(49))), Visibility::none);
  EXPECT_EQ(visibility(AttentionMask::causal_blocks(100, 10, 0, 51).with_window(Window::causal(50))),
            Visibility::partial);
  EXPECT_EQ(visibility(AttentionMask::causal_blocks(100, 10, 60, 40).with_window(Window::causal(50))),
            Visibility::full);
  EXPECT_THROW(attention_block_forward(x.q, x.k, x.v, AttentionMask::none().with_window(Window::causal(3))),
               RuntimeError);
}

// A sliding window without a causal mask, (left, right) keys either side of
// the query: none either side, narrower than a tile, across tile edges, one
// side unbounded, and wider than the sequence (no mask at all).
TEST(AttentionBlock, TwoSidedWindowMatchesTheReference) {
  const int64_t s = 300;
  const Inputs x = make_inputs(DType::f32, 1, s, 4, 2, 16);
  const AttentionOut full = attention_block_forward(x.q, x.k, x.v, AttentionMask::none());
  std::vector<int64_t> pos(s);
  std::iota(pos.begin(), pos.end(), 0);
  for (Window w : {Window{0, 0}, Window{5, 3}, Window{63, 64}, Window{130, 10}, Window{kNoWindow, 20},
                   Window{40, kNoWindow}, Window{400, 400}}) {
    const AttentionMask mask = AttentionMask::positions(pos, pos).with_window(w);
    AttentionOut f = attention_block_forward(x.q, x.k, x.v, mask);
    AttentionGrads g = attention_block_backward(x.q, x.k, x.v, f.out, f.lse, x.dout, mask);
    ref::AttentionResult rf = ref::attention_forward(x.q, x.k, x.v, false, {w.left, w.right});
    ref::AttentionGradients rg = ref::attention_backward(x.q, x.k, x.v, x.dout, false, {w.left, w.right});
    const std::string what = "window=" + std::to_string(w.left) + "," + std::to_string(w.right);
    EXPECT_LT(err(f.out, rf.out), 2e-6) << what;
    EXPECT_LT(err(f.lse, rf.lse), 2e-6) << what;
    EXPECT_LT(err(g.dq, rg.dq), 1e-5) << what;
    EXPECT_LT(err(g.dk, rg.dk), 1e-5) << what;
    EXPECT_LT(err(g.dv, rg.dv), 1e-5) << what;
    if (w.left < 130 && w.left != kNoWindow) {
      EXPECT_LT(f.scores, full.scores) << what;
    }
    // The mask's own count: a query at i sees the keys of [i - left, i + right] in [0, s).
    int64_t pairs = 0;
    for (int64_t i = 0; i < s; ++i)
      pairs += std::min(s - 1, w.right == kNoWindow ? s : i + w.right) -
               std::max<int64_t>(0, w.left == kNoWindow ? 0 : i - w.left) + 1;
    EXPECT_EQ(visible_pairs(mask, s, s), pairs) << what;
  }
  // Blocks of a sharded sequence: keys wholly after every query's window are hidden too.
  auto blocks = [](int64_t q0, int64_t sq, int64_t k0, int64_t sk, Window w) {
    std::vector<int64_t> q(sq), k(sk);
    std::iota(q.begin(), q.end(), q0);
    std::iota(k.begin(), k.end(), k0);
    return visibility(AttentionMask::positions(q, k).with_window(w));
  };
  EXPECT_EQ(blocks(0, 10, 20, 10, {0, 10}), Visibility::none);
  EXPECT_EQ(blocks(0, 10, 19, 10, {0, 10}), Visibility::partial);
  EXPECT_EQ(blocks(10, 10, 0, 10, {0, 5}), Visibility::none);
  EXPECT_EQ(blocks(10, 10, 0, 10, {2, 0}), Visibility::partial);
  EXPECT_EQ(blocks(10, 10, 5, 10, {20, 20}), Visibility::full);
  // A causal mask sees no later key: a right side is refused.
  EXPECT_THROW(attention_block_forward(x.q, x.k, x.v, mask_for(true, s).with_window({4, 2})), RuntimeError);
}

// Multi-head latent attention's shapes: q/k head dim other than v's (192 and
// 128 in DeepSeek-V3, here 24 and 16 and the reverse), causal, windowed and
// split into merged key blocks; the scale is 1/sqrt(d_qk).
TEST(AttentionBlock, DifferentValueHeadDimMatchesTheReference) {
  const int64_t s = 150;
  for (auto [d, dv] : {std::pair<int64_t, int64_t>{24, 16}, {16, 40}}) {
    const Inputs x = make_inputs(DType::f32, 2, s, 4, 2, d, 0, dv);
    for (int64_t window : {kNoWindow, int64_t{40}}) {
      const AttentionMask mask = mask_for(true, s).with_window(Window::causal(window));
      AttentionOut f = attention_block_forward(x.q, x.k, x.v, mask);
      EXPECT_EQ(f.out.shape(), (Shape{2, s, 4, dv}));
      AttentionGrads g = attention_block_backward(x.q, x.k, x.v, f.out, f.lse, x.dout, mask);
      ref::AttentionResult rf = ref::attention_forward(x.q, x.k, x.v, true, {window});
      ref::AttentionGradients rg = ref::attention_backward(x.q, x.k, x.v, x.dout, true, {window});
      const std::string what =
          "d=" + std::to_string(d) + " dv=" + std::to_string(dv) + " window=" + std::to_string(window);
      EXPECT_LT(err(f.out, rf.out), 2e-6) << what;
      EXPECT_LT(err(f.lse, rf.lse), 2e-6) << what;
      EXPECT_LT(err(g.dq, rg.dq), 1e-5) << what;
      EXPECT_LT(err(g.dk, rg.dk), 1e-5) << what;
      EXPECT_LT(err(g.dv, rg.dv), 1e-5) << what;
    }
    // Two key blocks merged by LSE give the whole block.
    const AttentionOut whole = attention_block_forward(x.q, x.k, x.v, AttentionMask::none());
    AttentionOut a = attention_block_forward(x.q, narrow(x.k, 1, 0, 70), narrow(x.v, 1, 0, 70), AttentionMask::none());
    const AttentionOut b =
        attention_block_forward(x.q, narrow(x.k, 1, 70, s - 70), narrow(x.v, 1, 70, s - 70), AttentionMask::none());
    attention_merge(a.out, a.lse, b.out, b.lse);
    EXPECT_LT(err(a.out, whole.out), 1e-6);
    EXPECT_LT(err(a.lse, whole.lse), 1e-6);
  }
  const Inputs x = make_inputs(DType::f32, 1, 8, 2, 1, 8, 0, 4);
  const Inputs other = make_inputs(DType::f32, 1, 8, 2, 1, 8, 6, 4);
  EXPECT_THROW(attention_block_forward(x.q, x.k, other.v, AttentionMask::none()), RuntimeError);  // v's rows
  const AttentionOut f = attention_block_forward(x.q, x.k, x.v, AttentionMask::none());
  EXPECT_THROW(attention_block_backward(x.q, x.k, x.v, f.out, f.lse, x.q, AttentionMask::none()),
               RuntimeError);  // dout shaped like q, not like out
}

// bf16 and f16 storage: f32 inside, one rounding of the output.
TEST(AttentionBlock, LowPrecisionStorageRoundsOnce) {
  for (DType dt : {DType::bf16, DType::f16}) {
    const Inputs x = make_inputs(dt, 1, 130, 2, 2, 32);
    AttentionOut f = attention_block_forward(x.q, x.k, x.v, mask_for(true, 130), dt);
    EXPECT_EQ(f.out.dtype(), dt);
    ref::AttentionResult rf = ref::attention_forward(x.q, x.k, x.v, true);
    EXPECT_LT(err(f.out, rf.out), 2 * unit_roundoff(dt)) << dtype_name(dt);
    EXPECT_LT(err(f.lse, rf.lse), 1e-5) << dtype_name(dt);  // f32, from rounded inputs
  }
}

// Splitting the keys into blocks and merging the partial (out, LSE) gives the
// whole result; the backward of each block with the final LSE sums to the
// whole backward. This is what the ring does.
TEST(AttentionBlock, BlocksMergeToTheWhole) {
  const int64_t s = 96, half = 48;
  const Inputs x = make_inputs(DType::f32, 2, s, 2, 1, 8);
  for (bool causal : {false, true}) {
    AttentionOut whole = attention_block_forward(x.q, x.k, x.v, mask_for(causal, s));
    Tensor k0 = narrow(x.k, 1, 0, half), k1 = narrow(x.k, 1, half, half);
    Tensor v0 = narrow(x.v, 1, 0, half), v1 = narrow(x.v, 1, half, half);
    auto mask = [&](int64_t k_start) {
      return causal ? AttentionMask::causal_blocks(0, s, k_start, half) : AttentionMask::none();
    };
    AttentionOut a = attention_block_forward(x.q, k0, v0, mask(0));
    AttentionOut b = attention_block_forward(x.q, k1, v1, mask(half));
    attention_merge(a.out, a.lse, b.out, b.lse);
    EXPECT_LT(err(a.out, whole.out), 1e-6) << "causal=" << causal;
    EXPECT_LT(err(a.lse, whole.lse), 1e-6) << "causal=" << causal;

    Tensor delta = attention_delta(whole.out, x.dout);
    AttentionGrads g = attention_block_backward(x.q, x.k, x.v, whole.out, whole.lse, x.dout, mask_for(causal, s));
    Tensor dq = Tensor::zeros(x.q.shape(), DType::f32);
    Tensor dk0 = Tensor::zeros(k0.shape(), DType::f32), dv0 = Tensor::zeros(k0.shape(), DType::f32);
    Tensor dk1 = Tensor::zeros(k1.shape(), DType::f32), dv1 = Tensor::zeros(k1.shape(), DType::f32);
    attention_block_backward_accumulate(x.q, k0, v0, whole.out, x.dout, whole.lse, delta, mask(0), dq, dk0, dv0);
    attention_block_backward_accumulate(x.q, k1, v1, whole.out, x.dout, whole.lse, delta, mask(half), dq, dk1, dv1);
    EXPECT_LT(err(dq, g.dq), 1e-6);
    EXPECT_LT(err(concat({dk0, dk1}, 1), g.dk), 1e-6);
    EXPECT_LT(err(concat({dv0, dv1}, 1), g.dv), 1e-6);
  }
}

// Rows that see no key: LSE -inf, output 0, gradients 0, and no NaN when
// merged with another empty block or with a real one.
TEST(AttentionBlock, FullyMaskedRowsAreZeroNotNaN) {
  const Inputs x = make_inputs(DType::f32, 1, 4, 1, 1, 4);
  // Keys at 10..13 are all in the future of queries at 0..3.
  AttentionMask future = AttentionMask::causal_blocks(0, 4, 10, 4);
  EXPECT_EQ(visibility(future), Visibility::none);
  AttentionOut f = attention_block_forward(x.q, x.k, x.v, future);
  EXPECT_EQ(f.scores, 0);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(f.lse.at(i), -INFINITY);
  for (int64_t i = 0; i < f.out.numel(); ++i) EXPECT_EQ(f.out.at(i), 0.0);
  AttentionGrads g = attention_block_backward(x.q, x.k, x.v, f.out, f.lse, x.dout, future);
  for (const Tensor* t : {&g.dq, &g.dk, &g.dv})
    for (int64_t i = 0; i < t->numel(); ++i) EXPECT_EQ(t->at(i), 0.0);

  AttentionOut empty = attention_block_forward(x.q, x.k, x.v, future);
  attention_merge(f.out, f.lse, empty.out, empty.lse);  // -inf with -inf
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(f.lse.at(i), -INFINITY);
  for (int64_t i = 0; i < f.out.numel(); ++i) EXPECT_EQ(f.out.at(i), 0.0);
  AttentionOut real = attention_block_forward(x.q, x.k, x.v, AttentionMask::none());
  attention_merge(f.out, f.lse, real.out, real.lse);  // -inf with finite
  EXPECT_EQ(compare(f.out, real.out).max_abs, 0.0);
  EXPECT_EQ(compare(f.lse, real.lse).max_abs, 0.0);
}

// The merge of two halves at very different scales stays finite and exact
// (the naive exp(lse) form overflows in f32 at lse ~ 89).
TEST(AttentionBlock, MergeIsStableAtLargeLse) {
  Tensor out_a = Tensor::from_values({1, 1, 1, 1}, {1.0}, DType::f32);
  Tensor lse_a = Tensor::from_values({1, 1, 1}, {1000.0}, DType::f32);
  Tensor out_b = Tensor::from_values({1, 1, 1, 1}, {3.0}, DType::f32);
  Tensor lse_b = Tensor::from_values({1, 1, 1}, {1000.0}, DType::f32);
  attention_merge(out_a, lse_a, out_b, lse_b);
  EXPECT_FLOAT_EQ(static_cast<float>(out_a.at(0)), 2.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(lse_a.at(0)), 1000.0f + std::log(2.0f));
}

// Rows at arbitrary global positions (a zigzag shard: chunks 0 and 3 of 4)
// mask exactly like the same rows of the whole sequence.
TEST(AttentionBlock, PositionsMaskAShardedSequence) {
  const int64_t s = 64, c = 16;
  const Inputs x = make_inputs(DType::f32, 1, s, 2, 2, 8);
  std::vector<int64_t> rows(c * 2);
  std::iota(rows.begin(), rows.begin() + c, 0);
  std::iota(rows.begin() + c, rows.end(), 3 * c);
  Tensor q = concat({narrow(x.q, 1, 0, c), narrow(x.q, 1, 3 * c, c)}, 1);
  Tensor dout = concat({narrow(x.dout, 1, 0, c), narrow(x.dout, 1, 3 * c, c)}, 1);
  std::vector<int64_t> keys(s);
  std::iota(keys.begin(), keys.end(), 0);
  AttentionMask mask = AttentionMask::causal_positions(rows, keys);
  EXPECT_EQ(visible_pairs(mask, 2 * c, s), c * (c + 1) / 2 + c * 3 * c + c * (c + 1) / 2);
  AttentionOut f = attention_block_forward(q, x.k, x.v, mask);
  AttentionGrads g = attention_block_backward(q, x.k, x.v, f.out, f.lse, dout, mask);
  ref::AttentionRows r = ref::attention_rows(x.q, x.k, x.v, x.dout, true, rows);
  EXPECT_LT(err(f.out, r.out), 2e-6);
  EXPECT_LT(err(f.lse, r.lse), 2e-6);
  EXPECT_LT(err(g.dq, r.dq), 1e-5);
}

TEST(AttentionBlock, VisibilityOfBlocks) {
  EXPECT_EQ(visibility(AttentionMask::none()), Visibility::full);
  EXPECT_EQ(visibility(AttentionMask::causal_blocks(8, 4, 0, 8)), Visibility::full);
  EXPECT_EQ(visibility(AttentionMask::causal_blocks(0, 4, 0, 4)), Visibility::partial);
  EXPECT_EQ(visibility(AttentionMask::causal_blocks(0, 4, 4, 4)), Visibility::none);
  EXPECT_EQ(visible_pairs(AttentionMask::causal_blocks(0, 4, 0, 4), 4, 4), 10);
  EXPECT_EQ(visible_pairs(AttentionMask::none(), 3, 5), 15);
}

TEST(AttentionBlock, RejectsShapesThatDoNotFit) {
  const Inputs x = make_inputs(DType::f32, 1, 4, 3, 2, 4);  // 2 kv heads do not divide 3
  EXPECT_THROW(attention_block_forward(x.q, x.k, x.v, AttentionMask::none()), RuntimeError);
  const Inputs y = make_inputs(DType::f32, 1, 4, 2, 1, 4);
  EXPECT_THROW(attention_block_forward(y.q, y.k, y.v, AttentionMask::causal_blocks(0, 3, 0, 4)), RuntimeError);
}

}  // namespace
}  // namespace sextant::ops
