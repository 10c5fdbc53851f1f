#include "kernels/moe/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "harness/comm_values.h"
#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/strings.h"
#include "kernels/ops/gemm.h"

namespace sextant::moe {

int64_t expert_capacity(int64_t group_tokens, int topk, int experts, double capacity_factor) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(group_tokens) * topk / experts * capacity_factor));
}

namespace {

Tensor as_f32(const Tensor& t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); }

// scores = softmax(logits) per row, and lse = logsumexp per row.
void softmax_rows(const Tensor& logits, Tensor& scores, std::vector<float>& lse) {
  const int64_t rows = logits.dim(0), e = logits.dim(1);
  const float* l = logits.data<float>();
  float* s = scores.data<float>();
  lse.resize(static_cast<size_t>(rows));
  for (int64_t t = 0; t < rows; ++t) {
    const float* lt = l + t * e;
    float* st = s + t * e;
    const float m = *std::max_element(lt, lt + e);
    float sum = 0;
    for (int64_t i = 0; i < e; ++i) sum += st[i] = std::exp(lt[i] - m);
    for (int64_t i = 0; i < e; ++i) st[i] /= sum;
    lse[static_cast<size_t>(t)] = m + std::log(sum);
  }
}

// The k largest logits of one token, descending; ties go to the lower index.
void top_k(const float* logits, int experts, int k, int32_t* chosen) {
  const bool repeats = kernel_fault_planted(KernelFault::router_topk_repeats);
  float bias0 = 0;  // what the selection adds to expert 0's logit
  if (kernel_fault_planted(KernelFault::router_choice_bias))
    for (int i = 0; i < experts; ++i) bias0 = std::max(bias0, 0.01f * std::abs(logits[i]));
  auto seen = [&](int i) { return i == 0 ? logits[0] + bias0 : logits[i]; };
  for (int j = 0; j < k; ++j) {
    int best = -1;
    const int excluded = repeats ? std::max(j - 1, 0) : j;  // choices already taken
    for (int i = 0; i < experts; ++i) {
      if (std::find(chosen, chosen + excluded, i) != chosen + excluded) continue;
      if (best < 0 || seen(i) > seen(best)) best = i;
    }
    chosen[j] = best;
  }
}

// Routing probabilities of one token's k choices.
void choice_probs(const float* logits, const float* scores, const int32_t* chosen, int k, bool pre_softmax,
                  float* prob) {
  if (pre_softmax) {
    for (int j = 0; j < k; ++j) prob[j] = scores[chosen[j]];
    return;
  }
  const float m = logits[chosen[0]];  // the largest
  float sum = 0;
  for (int j = 0; j < k; ++j) sum += prob[j] = std::exp(logits[chosen[j]] - m);
  for (int j = 0; j < k; ++j) prob[j] /= sum;
}

// Marks the slots over capacity as dropped, group by group and expert by expert.
int64_t drop_over_capacity(SlotTable& s, const RouterOptions& o) {
  const int64_t group = o.capacity_group > 0 ? o.capacity_group : std::max<int64_t>(s.tokens, 1);
  int64_t dropped = 0;
  for (int64_t t0 = 0; t0 < s.tokens; t0 += group) {
    const int64_t t1 = std::min(s.tokens, t0 + group);
    const int64_t capacity = expert_capacity(t1 - t0, s.topk, o.experts, o.capacity_factor);
    std::vector<std::vector<int64_t>> candidates(static_cast<size_t>(o.experts));
    for (int64_t slot = t0 * s.topk; slot < t1 * s.topk; ++slot) candidates[s.expert[slot]].push_back(slot);
    for (std::vector<int64_t>& c : candidates) {
      if (static_cast<int64_t>(c.size()) <= capacity) continue;
      // Slots are in token order already: that is the position policy.
      if (o.drop == DropPolicy::probability)
        std::stable_sort(c.begin(), c.end(), [&](int64_t a, int64_t b) { return s.prob[a] > s.prob[b]; });
      if (o.fault_wrong_drop) std::reverse(c.begin(), c.end());  // keeps the ones it should drop
      for (size_t i = static_cast<size_t>(capacity); i < c.size(); ++i) s.kept[c[i]] = 0;
      dropped += static_cast<int64_t>(c.size()) - capacity;
    }
  }
  return dropped;
}

// f_i, P_i and the losses over the whole batch: one all-reduce of 2E + 2 sums.
void batch_statistics(Routing& r, const RouterOptions& o, Communicator& tokens) {
  const int e = r.experts;
  const int64_t t = r.slots.tokens;
  std::vector<double> sums(static_cast<size_t>(2 * e + 2), 0.0);
  for (int64_t slot = 0; slot < r.slots.slots(); ++slot) sums[r.slots.expert[slot]] += 1;
  const float* s = r.scores.data<float>();
  for (int64_t i = 0; i < t; ++i)
    for (int x = 0; x < e; ++x) sums[e + x] += s[i * e + x];
  for (float v : r.lse) sums[2 * e] += static_cast<double>(v) * v;
  sums[2 * e + 1] = static_cast<double>(t);
  small_all_reduce(tokens, sums.data(), sums.size(), ReduceOp::sum);

  r.global_tokens = static_cast<int64_t>(sums[2 * e + 1]);
  const double total = static_cast<double>(r.global_tokens);
  r.routed_fraction.assign(static_cast<size_t>(e), 0.0);
  r.mean_score.assign(static_cast<size_t>(e), 0.0);
  double balance = 0;
  for (int x = 0; x < e; ++x) {
    r.routed_fraction[x] = sums[x] / (total * r.slots.topk);
    r.mean_score[x] = sums[e + x] / total;
    balance += r.routed_fraction[x] * r.mean_score[x];
  }
  r.aux_loss = o.aux_coeff * e * balance;
  r.z_loss = o.z_coeff * sums[2 * e] / total;
}

}  // namespace

Routing route(const Tensor& x, const Tensor& w, const RouterOptions& o, Communicator& tokens) {
  if (x.ndim() != 2 || w.ndim() != 2 || w.dim(0) != x.dim(1) || w.dim(1) != o.experts)
    throw RuntimeError(cat("moe::route: x ", shape_string(x.shape()), " and w ", shape_string(w.shape()),
                           " must be [T, h] and [h, ", o.experts, "]"));
  if (o.topk < 1 || o.topk > o.experts)
    throw RuntimeError(cat("moe::route: topk ", o.topk, " outside [1, ", o.experts, "]"));
  const int64_t t = x.dim(0);
  const int e = o.experts, k = o.topk;
  Routing r;
  r.experts = e;
  // On the device only the logits gemm runs there: the [T, E] logits come to
  // the host, where softmax, top-k, capacity and the statistics run as on a
  // host run. They are E floats a token against h * k moved in the dispatch,
  // the capacity cut is a sequential sort per expert, and the permutation
  // indices are built on the host from the routing table anyway; so one
  // code makes the routing decisions on either device.
  r.logits = Tensor::empty({t, e}, DType::f32, x.device());
  ops::gemm(as_f32(x), false, as_f32(w), false, r.logits);  // l: [T, E] = x [T, h] W [h, E]
  if (!r.logits.is_host()) r.logits = r.logits.to(Device::host);
  r.scores = Tensor::empty({t, e}, DType::f32);
  softmax_rows(r.logits, r.scores, r.lse);

  SlotTable& s = r.slots;
  s.tokens = t;
  s.topk = k;
  s.expert.resize(static_cast<size_t>(t * k));
  s.prob.resize(static_cast<size_t>(t * k));
  s.kept.assign(static_cast<size_t>(t * k), 1);
  const float *l = r.logits.data<float>(), *sc = r.scores.data<float>();
  for (int64_t i = 0; i < t; ++i) {
    top_k(l + i * e, e, k, &s.expert[i * k]);
    choice_probs(l + i * e, sc + i * e, &s.expert[i * k], k, o.pre_softmax, &s.prob[i * k]);
  }
  if (o.drop != DropPolicy::none) r.dropped = drop_over_capacity(s, o);
  batch_statistics(r, o, tokens);
  return r;
}

// Per token, with s the softmax over all experts and p the routing probs:
//   top-k softmax:  dl[e_j] += p_j (dp_j - sum_i dp_i p_i)
//   pre_softmax:    ds[e_j] += dp_j, then dl += s (ds - <ds, s>)
//   aux:            ds_i += coeff E f_i / T         (through P_i = sum_t s_ti / T)
//   z:              dl_i += coeff 2 lse / T * s_i
Tensor router_logits_grad(const Routing& r, const std::vector<float>& dprob, const RouterOptions& o) {
  const SlotTable& s = r.slots;
  const int64_t t = s.tokens;
  const int e = r.experts, k = s.topk;
  if (static_cast<int64_t>(dprob.size()) != s.slots())
    throw RuntimeError(cat("moe::router_logits_grad: dprob has ", dprob.size(), " entries, need ", s.slots()));
  const double total = static_cast<double>(r.global_tokens);
  std::vector<float> aux(static_cast<size_t>(e));
  for (int i = 0; i < e; ++i) aux[i] = static_cast<float>(o.aux_coeff * e * r.routed_fraction[i] / total);
  const float z_scale = static_cast<float>(o.z_coeff * 2.0 / total);

  Tensor grad = Tensor::zeros({t, e}, DType::f32);
  float* dl = grad.data<float>();
  const float* sc = r.scores.data<float>();
  std::vector<float> ds(static_cast<size_t>(e));
  for (int64_t i = 0; i < t; ++i) {
    float* dli = dl + i * e;
    const float* si = sc + i * e;
    const int32_t* chosen = &s.expert[i * k];
    const float* p = &s.prob[i * k];
    const float* dp = &dprob[i * k];
    std::copy(aux.begin(), aux.end(), ds.begin());
    if (o.pre_softmax) {
      for (int j = 0; j < k; ++j) ds[chosen[j]] += dp[j];
    } else {
      float dot = 0;
      for (int j = 0; j < k; ++j) dot += dp[j] * p[j];
      for (int j = 0; j < k; ++j) dli[chosen[j]] += p[j] * (dp[j] - dot);
    }
    float dot = 0;
    for (int x = 0; x < e; ++x) dot += ds[x] * si[x];
    for (int x = 0; x < e; ++x) dli[x] += si[x] * (ds[x] - dot) + z_scale * r.lse[i] * si[x];
  }
  return grad;
}

}  // namespace sextant::moe
