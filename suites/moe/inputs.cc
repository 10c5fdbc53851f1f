// Deterministic inputs whose routing f32 can resolve.
//
// The router computes its logits in f32. A dot product of length h computed
// in f32 in any order is within gamma_h = h u / (1 - h u) (u = 2^-24) of the
// exact one, relative to sum_j |x_j w_j| (Higham, Accuracy and Stability,
// 3.1). When the k-th and (k+1)-th logits of a token are further apart than
// twice the sum of their bounds, every correct kernel (any blocking, any rank
// count) and the float64 reference pick the same experts. Under the
// probability drop policy the capacity-th and (capacity+1)-th probabilities of
// an expert need the same; a softmax moves by at most 2 max|dl| + (E + 8) u
// relative.
//
// The router weights are one fixed draw. A token row below its margin is
// drawn again from the next stream of the same spec (row t, attempt a: seed
// + a * kStream), and the boundary token of an unresolvable capacity cut
// likewise, until the group is clean. Rows depend only on their capacity
// group (a rank's tokens), so a rank builds its rows alone and the check
// builds the whole batch group by group, identically.
#include <algorithm>
#include <cmath>

#include "harness/error.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "reference/moe.h"
#include "suites/moe/moe.h"

namespace sextant::moe_suite {

namespace {

// Uniform in [-a, a) has variance a^2 / 3: these scales keep every
// pre-activation near unit variance (x has variance 1/3).
double fan_in_scale(int64_t fan_in) { return 3.0 / std::sqrt(static_cast<double>(fan_in)); }

constexpr double kSafety = 2.0;
constexpr uint64_t kStream = 0x9e3779b97f4a7c15ULL;
constexpr int kMaxRounds = 64;

// Rows whose top-k set f32 might not resolve, and the max logit error bound of every row.
std::vector<int64_t> unresolvable_topk(const Problem& p, const Tensor& x, const Tensor& w, const Tensor& logits,
                                       std::vector<double>& worst) {
  const int64_t t = x.dim(0), h = p.hidden, e = p.experts;
  const double u = std::ldexp(1.0, -24), gamma = h * u / (1 - h * u);
  const double *X = x.data<double>(), *W = w.data<double>();
  std::vector<int64_t> bad;
  worst.assign(static_cast<size_t>(t), 0.0);
  std::vector<double> bound(static_cast<size_t>(e));
  for (int64_t i = 0; i < t; ++i) {
    std::fill(bound.begin(), bound.end(), 0.0);
    for (int64_t k = 0; k < h; ++k)
      for (int64_t j = 0; j < e; ++j) bound[j] += gamma * std::abs(X[i * h + k] * W[k * e + j]);
    worst[i] = *std::max_element(bound.begin(), bound.end());
    if (p.topk == e) continue;
    const double* l = logits.data<double>() + i * e;
    std::vector<int> order(static_cast<size_t>(e));
    for (int j = 0; j < e; ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    const int a = order[p.topk - 1], b = order[p.topk];
    if (l[a] - l[b] <= kSafety * (bound[a] + bound[b])) bad.push_back(i);
  }
  return bad;
}

// Rows at a capacity cut (probability policy) that f32 might order differently.
std::vector<int64_t> unresolvable_cuts(const Problem& p, const Tensor& logits, const std::vector<double>& worst) {
  // Top-1 softmax gives every slot probability exactly 1 in f32 and f64: the
  // cut then falls by token order, which both break the same way.
  if (p.drop != moe::DropPolicy::probability || (p.topk == 1 && !p.pre_softmax)) return {};
  const int64_t t = logits.dim(0);
  ref::MoeConfig c;
  c.experts = p.experts;
  c.topk = p.topk;
  c.pre_softmax = p.pre_softmax;
  const ref::MoeRouting r = ref::moe_route(logits, c);  // dropless: every candidate
  const int64_t capacity = moe::expert_capacity(t, p.topk, p.experts, p.capacity_factor);
  const double rel = (p.experts + 8) * std::ldexp(1.0, -24);  // rounding inside the softmax
  std::vector<int64_t> bad;
  for (int e = 0; e < p.experts; ++e) {
    std::vector<std::pair<double, int64_t>> cand;  // (prob, token)
    for (int64_t s = 0; s < t * p.topk; ++s)
      if (r.expert[s] == e) cand.push_back({r.prob[s], s / p.topk});
    if (capacity == 0 || static_cast<int64_t>(cand.size()) <= capacity) continue;
    std::stable_sort(cand.begin(), cand.end(), [](const auto& m, const auto& n) { return m.first > n.first; });
    const auto& [pa, ta] = cand[capacity - 1];
    const auto& [pb, tb] = cand[capacity];
    if (pa - pb <= kSafety * (pa * (2 * worst[ta] + rel) + pb * (2 * worst[tb] + rel))) bad.push_back(tb);
  }
  return bad;
}

}  // namespace

Tensor token_block(const Problem& p, const char* name, int64_t row0, int64_t rows, DType dtype, uint64_t seed) {
  return random_block({p.tokens, p.hidden}, {row0, 0}, {rows, p.hidden}, dtype, {seed, tensor_id(name), 1.0});
}

// W1: [E, h, ffn] sliced along ffn; W2: [E, ffn, h] sliced along ffn (rows).
Tensor expert_block(const Problem& p, bool second, int expert, int slice, int slices, DType dtype, uint64_t seed) {
  const int64_t f = p.ffn / slices;
  if (!second)
    return random_block({p.experts, p.hidden, p.ffn}, {expert, 0, slice * f}, {1, p.hidden, f}, dtype,
                        {seed, tensor_id("moe.w1"), fan_in_scale(p.hidden)})
        .reshape({p.hidden, f});
  return random_block({p.experts, p.ffn, p.hidden}, {expert, slice * f, 0}, {1, f, p.hidden}, dtype,
                      {seed, tensor_id("moe.w2"), fan_in_scale(p.ffn)})
      .reshape({f, p.hidden});
}

// Unit-variance logits; skewed routing scales the columns of the hot experts,
// so they win the top-k far more often.
Tensor router_weights(const Problem& p, DType dtype, uint64_t seed) {
  Tensor w = random_tensor({p.hidden, p.experts}, DType::f64, {seed, tensor_id("moe.router"), fan_in_scale(p.hidden)});
  if (p.skewed)
    for (int64_t i = 0; i < p.hidden; ++i)
      for (int e = 0; e < p.hot_experts; ++e) w.data<double>()[i * p.experts + e] *= p.skew;
  return w.to(dtype);
}

std::vector<int64_t> unresolvable_rows(const Problem& p, const Tensor& x_in, const Tensor& router) {
  const Tensor x = x_in.to(DType::f64), w = router.to(DType::f64);
  const Tensor logits = ref::moe_router_logits(x, w);
  std::vector<double> worst;
  std::vector<int64_t> bad = unresolvable_topk(p, x, w, logits, worst);
  if (bad.empty()) bad = unresolvable_cuts(p, logits, worst);  // cuts of settled routing only
  return bad;
}

Tensor token_rows(const Problem& p, int64_t row0, int64_t rows, const Tensor& router, DType dtype, uint64_t seed,
                  int64_t* redrawn) {
  Tensor x = token_block(p, "moe.x", row0, rows, dtype, seed);
  std::vector<uint64_t> attempt(static_cast<size_t>(rows), 0);
  for (int round = 0; round < kMaxRounds; ++round) {
    const std::vector<int64_t> bad = unresolvable_rows(p, x, router);
    if (bad.empty()) return x;
    for (int64_t r : bad) {
      const uint64_t a = ++attempt[r];
      if (redrawn && a == 1) ++*redrawn;
      const Tensor row = random_block({p.tokens, p.hidden}, {row0 + r, 0}, {1, p.hidden}, dtype,
                                      {seed + a * kStream, tensor_id("moe.x"), 1.0});
      write_slice(x, 0, r, row);
    }
  }
  throw RuntimeError(cat("moe: rows ", row0, "..", row0 + rows - 1, " still have routing f32 cannot resolve after ",
                         kMaxRounds, " redraws; change --seed or the sizes"));
}

}  // namespace sextant::moe_suite
