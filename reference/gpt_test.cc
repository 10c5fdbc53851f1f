#include "reference/gpt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "harness/compare.h"
#include "harness/rng.h"
#include "reference/cross_entropy.h"
#include "reference/testing/gradcheck.h"

namespace sextant::ref {
namespace {

GptDims tiny_dims() {
  GptDims d;
  d.vocab = 11, d.hidden = 8, d.heads = 2, d.head_dim = 3, d.ffn = 12, d.layers = 2, d.seq = 5;
  d.moe.experts = 4, d.moe.topk = 2;
  return d;
}

Tensor rnd(const Shape& s, const char* name, double scale) {
  return random_tensor(s, DType::f64, {5, tensor_id(name), scale});
}

// Layer 0 dense, layer 1 MoE.
GptParams tiny_params(const GptDims& d) {
  const int64_t h = d.hidden, q = d.heads * d.dv(), qkv = (d.heads + d.kv()) * d.head_dim + d.kv() * d.dv(), f = d.ffn,
                e = d.moe.experts;
  GptParams p;
  p.embedding = rnd({d.vocab, h}, "emb", 1.0);
  for (int l = 0; l < d.layers; ++l) {
    GptLayer L;
    std::string n = "l" + std::to_string(l);
    L.ln1_gamma = rnd({h}, (n + "g1").c_str(), 1.0), L.ln1_beta = rnd({h}, (n + "b1").c_str(), 0.1);
    L.wqkv = rnd({h, qkv}, (n + "wqkv").c_str(), 0.5), L.bqkv = rnd({qkv}, (n + "bqkv").c_str(), 0.1);
    L.wo = rnd({q, h}, (n + "wo").c_str(), 0.5), L.bo = rnd({h}, (n + "bo").c_str(), 0.1);
    L.ln2_gamma = rnd({h}, (n + "g2").c_str(), 1.0), L.ln2_beta = rnd({h}, (n + "b2").c_str(), 0.1);
    L.is_moe = l == 1;
    if (L.is_moe) {
      L.moe.router = rnd({h, e}, (n + "router").c_str(), 1.0);
      L.moe.w1 = rnd({e, h, f}, (n + "ew1").c_str(), 0.4), L.moe.w2 = rnd({e, f, h}, (n + "ew2").c_str(), 0.3);
    } else {
      L.w1 = rnd({h, f}, (n + "w1").c_str(), 0.4), L.b1 = rnd({f}, (n + "mb1").c_str(), 0.1);
      L.w2 = rnd({f, h}, (n + "w2").c_str(), 0.3), L.b2 = rnd({h}, (n + "mb2").c_str(), 0.1);
    }
    p.layers.push_back(L);
  }
  p.lnf_gamma = rnd({h}, "gf", 1.0), p.lnf_beta = rnd({h}, "bf", 0.1);
  p.head = rnd({h, d.vocab}, "head", 0.5);
  return p;
}

std::vector<int64_t> tiny_tokens(const GptDims& d, int64_t batch) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < batch * (d.seq + 1); ++i)
    t.push_back(static_cast<int64_t>(random_bits(1, tensor_id("tokens"), i) % d.vocab));
  return t;
}

void check_gradients(const GptDims& d) {
  const int64_t batch = 2;
  const std::vector<int64_t> tokens = tiny_tokens(d, batch);
  GptParams p = tiny_params(d);
  GptStep step = gpt_forward_backward(d, p, tokens, batch);
  EXPECT_NEAR(step.loss, gpt_loss(d, p, tokens, batch), 1e-12);
  std::vector<Tensor*> params = p.tensors(), grads = step.grads.tensors();
  ASSERT_EQ(params.size(), grads.size());
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor original = params[i]->clone();
    Tensor numeric = numeric_gradient(
        [&](const Tensor& x) {
          params[i]->copy_from(x);
          return gpt_loss(d, p, tokens, batch);
        },
        original);
    params[i]->copy_from(original);
    EXPECT_LT(compare(*grads[i], numeric).rel_l2, kGradcheckTolerance) << "parameter tensor " << i;
  }
}

// Every parameter tensor's gradient against central finite differences,
// with multi-head and grouped-query (4 query heads over 2 KV heads)
// attention, and with MLA's head dims (v narrower than q and k, and wider).
TEST(ReferenceGpt, BackwardMatchesFiniteDifferences) {
  for (const auto& [kv_heads, v_head_dim] : {std::pair{0, 0}, std::pair{2, 0}, std::pair{2, 2}, std::pair{0, 5}}) {
    GptDims d = tiny_dims();
    d.heads = 4, d.kv_heads = kv_heads, d.v_head_dim = v_head_dim;
    SCOPED_TRACE(testing::Message() << "kv_heads " << kv_heads << " v_head_dim " << v_head_dim);
    check_gradients(d);
  }
}

// Grouped-query attention is multi-head attention whose query heads of a
// group share one k and v: the MHA model with each group's k, v columns
// repeated for its query heads has the same loss, and each shared k, v
// gradient is the sum of the repeated heads' gradients.
TEST(ReferenceGpt, GroupedQueryAttentionIsMhaWithSharedKeysAndValues) {
  GptDims gqa = tiny_dims();
  gqa.heads = 4, gqa.kv_heads = 2;
  GptDims mha = gqa;
  mha.kv_heads = 0;
  const int64_t dh = gqa.head_dim, r = 2, h = gqa.hidden;
  const GptParams pg = tiny_params(gqa);
  GptParams pm = pg;
  // MHA column of (head, part, e) from GQA column of (group, part', e).
  auto repeat = [&](const Tensor& w, int64_t rows) {
    Tensor out = Tensor::zeros({rows, 3 * gqa.heads * dh}, DType::f64);
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t head = 0; head < gqa.heads; ++head)
        for (int64_t part = 0; part < 3; ++part)
          for (int64_t e = 0; e < dh; ++e) {
            const int64_t g = head / r, src_part = part == 0 ? head % r : r + part - 1;
            out.set(row * 3 * gqa.heads * dh + (head * 3 + part) * dh + e,
                    w.at(row * (gqa.heads + 2 * 2) * dh + (g * (r + 2) + src_part) * dh + e));
          }
    return out;
  };
  for (size_t l = 0; l < pm.layers.size(); ++l) {
    pm.layers[l].wqkv = repeat(pg.layers[l].wqkv, h);
    pm.layers[l].bqkv = repeat(pg.layers[l].bqkv.reshape({1, pg.layers[l].bqkv.numel()}), 1).reshape({3 * 4 * dh});
  }
  const std::vector<int64_t> tokens = tiny_tokens(gqa, 2);
  const GptStep sg = gpt_forward_backward(gqa, pg, tokens, 2), sm = gpt_forward_backward(mha, pm, tokens, 2);
  EXPECT_NEAR(sg.loss, sm.loss, 1e-12);
  // d bqkv of group 0's k: the sum over its query heads 0 and 1 of the MHA k bias gradients.
  const Tensor& bg = sg.grads.layers[0].bqkv;
  const Tensor& bm = sm.grads.layers[0].bqkv;
  for (int64_t e = 0; e < dh; ++e) {
    EXPECT_NEAR(bg.at((0 * (r + 2) + r) * dh + e), bm.at((0 * 3 + 1) * dh + e) + bm.at((1 * 3 + 1) * dh + e), 1e-12);
    EXPECT_NEAR(bg.at((1 * (r + 2) + r + 1) * dh + e), bm.at((2 * 3 + 2) * dh + e) + bm.at((3 * 3 + 2) * dh + e),
                1e-12);
    EXPECT_NEAR(bg.at((1 * (r + 2) + 1) * dh + e), bm.at((3 * 3 + 0) * dh + e), 1e-12);  // query head 3
  }
}

// Another run's routing with one token's second expert swapped for its
// third: followed when the band covers the gap between their logits (and
// the loss and gradients are those of the other routing), ignored when not.
TEST(ReferenceGpt, FollowsAnotherRunsRoutingWithinTheTieBand) {
  const GptDims d = tiny_dims();
  const std::vector<int64_t> tokens = tiny_tokens(d, 2);
  struct {
    std::vector<int64_t> inputs, targets;
  } b;
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t i = 0; i < d.seq; ++i) {
      b.inputs.push_back(tokens[r * (d.seq + 1) + i]);
      b.targets.push_back(tokens[r * (d.seq + 1) + i + 1]);
    }
  GptParams p = tiny_params(d);
  const GptStep own = gpt_forward_backward(d, p, b.inputs, b.targets, 2);
  ASSERT_EQ(own.routing.size(), 1u);
  RoutingFollow follow{{own.routing[0].expert}, 0};
  const int k = d.moe.topk;
  std::vector<int> others;  // token 0's experts not chosen
  for (int e = 0; e < d.moe.experts; ++e)
    if (e != follow.expert[0][0] && e != follow.expert[0][1]) others.push_back(e);
  follow.expert[0][k - 1] = others[0];
  EXPECT_EQ(gpt_forward_backward(d, p, b.inputs, b.targets, 2, &follow).routing[0].followed, 0);
  follow.tie_band = 10;  // every logit within 10 x max |l|: any top k counts
  const GptStep followed = gpt_forward_backward(d, p, b.inputs, b.targets, 2, &follow);
  EXPECT_EQ(followed.routing[0].followed, 1);
  std::vector<int> first(followed.routing[0].expert.begin(), followed.routing[0].expert.begin() + k);
  std::vector<int> want(follow.expert[0].begin(), follow.expert[0].begin() + k);
  std::sort(first.begin(), first.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(first, want);
  EXPECT_NE(compare(followed.grads.layers[1].moe.router, own.grads.layers[1].moe.router).rel_l2, 0.0);
  EXPECT_GT(std::abs(followed.loss - own.loss), 0.0);
}

TEST(ReferenceGpt, AdamStepsLowerTheLoss) {
  const GptDims d = tiny_dims();
  const std::vector<int64_t> tokens = tiny_tokens(d, 2);
  GptParams p = tiny_params(d);
  GptAdam adam;
  adam.config.lr = 1e-2;
  double first = 0, last = 0;
  for (int s = 0; s < 5; ++s) {
    GptStep step = gpt_forward_backward(d, p, tokens, 2);
    (s == 0 ? first : last) = step.loss;
    gpt_adam_step(p, step.grads, adam);
  }
  EXPECT_LT(last, first);
  EXPECT_EQ(adam.step, 5);
}

// Packed rows: the loss of a row holding sequences of 2 and 3 tokens is the
// token-weighted mean of the two sequences run as rows of their own (every
// other sublayer works per token, and the MoE here drops nothing), and its
// gradients are the finite differences of that loss.
TEST(ReferenceGpt, PackedRowsAttendWithinEachSequence) {
  GptDims packed = tiny_dims();  // seq 5
  packed.seq_lens = {2, 3};
  const GptParams p = tiny_params(packed);
  std::vector<int64_t> inputs, targets;
  for (int64_t i = 0; i < 5; ++i)
    inputs.push_back(static_cast<int64_t>(random_bits(2, tensor_id("in"), i) % packed.vocab)),
        targets.push_back(static_cast<int64_t>(random_bits(2, tensor_id("tg"), i) % packed.vocab));
  const double loss = gpt_loss(packed, p, inputs, targets, 1);
  GptDims alone = tiny_dims();
  double sum = 0;
  for (auto [start, n] : {std::pair<int64_t, int64_t>{0, 2}, {2, 3}}) {
    alone.seq = n;
    const std::vector<int64_t> in(inputs.begin() + start, inputs.begin() + start + n),
        tg(targets.begin() + start, targets.begin() + start + n);
    sum += n * gpt_loss(alone, p, in, tg, 1);
  }
  EXPECT_NEAR(loss, sum / 5, 1e-12);
  GptDims whole = tiny_dims();
  EXPECT_GT(std::abs(loss - gpt_loss(whole, p, inputs, targets, 1)), 1e-6) << "one sequence is not two";

  GptParams q = tiny_params(packed);
  GptStep step = gpt_forward_backward(packed, q, inputs, targets, 1);
  EXPECT_NEAR(step.loss, loss, 1e-12);
  std::vector<Tensor*> params = q.tensors(), grads = step.grads.tensors();
  for (size_t i : {size_t{0}, size_t{3}, params.size() - 1}) {  // embedding, a Wqkv, the head
    const Tensor original = params[i]->clone();
    const Tensor numeric = numeric_gradient(
        [&](const Tensor& x) {
          params[i]->copy_from(x);
          return gpt_loss(packed, q, inputs, targets, 1);
        },
        original);
    params[i]->copy_from(original);
    EXPECT_LT(compare(*grads[i], numeric).rel_l2, kGradcheckTolerance) << "parameter tensor " << i;
  }
}

// Padded packed rows: sequences of 2, 0 and 1 tokens in 3, 0 and 2 rows,
// then 2 rows of tail padding (seq 7). The padding predicts nothing and is
// seen by nothing, so loss and every gradient equal those of the row packed
// without padding (seq 3, no position embeddings), and the padding rows'
// embedding row (token 0) gets no gradient from them.
TEST(ReferenceGpt, PaddingRowsChangeNothing) {
  GptDims tight = tiny_dims();
  tight.seq = 3, tight.seq_lens = {2, 0, 1};
  GptDims padded = tight;
  padded.seq = 7, padded.seq_rows = {3, 0, 2};
  const GptParams p = tiny_params(tight);
  const std::vector<int64_t> rows = {0, 1, 3};  // the token rows of the padded row
  std::vector<int64_t> inputs, targets, padded_inputs(7, 0), padded_targets(7, kIgnoreTarget);
  for (int64_t i = 0; i < 3; ++i) {
    inputs.push_back(1 + static_cast<int64_t>(random_bits(2, tensor_id("in"), i) % (tight.vocab - 1)));
    targets.push_back(static_cast<int64_t>(random_bits(2, tensor_id("tg"), i) % tight.vocab));
    padded_inputs[rows[i]] = inputs[i], padded_targets[rows[i]] = targets[i];
  }
  const GptStep a = gpt_forward_backward(tight, p, inputs, targets, 1);
  const GptStep b = gpt_forward_backward(padded, p, padded_inputs, padded_targets, 1);
  EXPECT_NEAR(a.loss, b.loss, 1e-12);
  GptParams ga = a.grads, gb = b.grads;
  std::vector<Tensor*> want = ga.tensors(), got = gb.tensors();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LT(compare(*got[i], *want[i]).max_abs, 1e-12) << "tensor " << i;
  for (int64_t j = 0; j < tight.hidden; ++j) EXPECT_EQ(b.grads.embedding.at(j), 0.0) << "token 0 (padding), " << j;
}

}  // namespace
}  // namespace sextant::ref
