// Ring attention (p2p): member r starts with its own K/V block; at step i it
// holds the block of member r - i, computes its queries against it, and
// meanwhile passes the block on to r + 1 and receives the next from r - 1
// (isend/irecv posted before the compute, waited after it). After P steps
// every query has seen every key; partial results merge by their LSE.
//
// Backward recomputes each block with the final O and LSE. dQ accumulates
// locally; the dK/dV accumulator of a block travels with it: member r adds its
// contribution and sends the sum to r + 1 while computing the next step, and
// one last hop after the final step takes every accumulator home.
#include <algorithm>
#include <limits>

#include "harness/timing.h"
#include "kernels/attention/kv_exchange.h"
#include "kernels/attention/permute.h"
#include "kernels/ops/device_dispatch.h"

namespace sextant::cp {

namespace {

// The planted dkv_scale fault: t (f32) times factor, on the host (a device
// tensor goes there and back: a planted fault need not be fast).
void scale_planted(Tensor& t, double factor) {
  Tensor h = t.is_host() ? t : t.to(Device::host);
  float* p = h.data<float>();
  for (int64_t i = 0; i < h.numel(); ++i) p[i] = static_cast<float>(p[i] * factor);
  if (!t.is_host()) t.copy_from(h);
}

}  // namespace

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
enum Tag { kTagK = 0, kTagV = 1, kTagDk = 2, kTagDv = 3 };

// Sends `mine` to the next member and receives the previous member's into
// `incoming` (allocated like `mine`); the caller waits on the requests.
std::vector<RequestPtr> pass_on(Communicator& ring, const std::vector<const Tensor*>& mine,
                                const std::vector<Tensor*>& incoming, int first_tag) {
  const int n = ring.size(), next = (ring.rank() + 1) % n, prev = (ring.rank() + n - 1) % n;
  std::vector<RequestPtr> requests;
  ring.group_start();
  for (size_t i = 0; i < mine.size(); ++i) {
    *incoming[i] = Tensor::empty(mine[i]->shape(), mine[i]->dtype(), mine[i]->device());
    requests.push_back(ring.irecv(incoming[i]->raw(), static_cast<size_t>(mine[i]->numel()), mine[i]->dtype(), prev,
                                  first_tag + static_cast<int>(i)));
  }
  for (size_t i = 0; i < mine.size(); ++i)
    requests.push_back(ring.isend(mine[i]->raw(), static_cast<size_t>(mine[i]->numel()), mine[i]->dtype(), next,
                                  first_tag + static_cast<int>(i)));
  ring.group_end();
  return requests;
}

// Planted fault: the LSEs are added instead of combined by log-sum-exp (the
// output weights still come from the stable merge, so only later merges and
// the backward see the damage). On a GPU the LSEs (one value per row) make a
// round trip through host memory: a fault only ever runs in a conformance check.
void merge_adding_lse(Tensor& out, Tensor& lse, const Tensor& out_b, const Tensor& lse_b) {
  const Tensor before = lse.to(Device::host);
  ops::attention_merge(out, lse, out_b, lse_b);
  Tensor merged = lse.to(Device::host);
  const Tensor added = lse_b.to(Device::host);
  float* l = merged.data<float>();
  const float* a = before.data<float>();
  const float* b = added.data<float>();
  for (int64_t i = 0; i < merged.numel(); ++i)
    if (a[i] != kNegInf && b[i] != kNegInf) l[i] = a[i] + b[i];
  lse.copy_from(merged);
}

// An f32 LSE accumulator [b, h, n] of rows that have seen nothing yet (-inf), on `device`.
Tensor empty_lse(int64_t b, int64_t h, int64_t n, Device device) {
  Tensor lse = Tensor::empty({b, h, n}, DType::f32);
  std::fill(lse.data<float>(), lse.data<float>() + lse.numel(), kNegInf);
  return device == Device::host ? lse : lse.to(device);
}

// Whether a step computes its block: not when the mask hides it wholly (a
// causal block of later keys, a block before every query's window), which
// the stats count. Under window_skip_partial a partly covered windowed
// block is skipped too.
bool computes(const BlockPlan& plan, const ops::AttentionMask& mask) {
  const ops::Visibility seen = ops::visibility(mask);
  const bool skip = seen == ops::Visibility::none ||
                    (plan.fault == Fault::window_skip_partial && mask.windowed() && seen == ops::Visibility::partial);
  if (plan.stats) {
    ++plan.stats->ring_steps;
    if (skip) ++plan.stats->ring_steps_skipped;
  }
  return !skip;
}

}  // namespace

ops::AttentionOut ring_forward(Communicator* ring, const Tensor& q, const Tensor& k, const Tensor& v,
                               const BlockPlan& plan) {
  const int members = ring ? ring->size() : 1, me = ring ? ring->rank() : 0;
  // acc: out [b, n, hq, dv] f32 and lse [b, hq, n], empty (-inf) until a block is merged
  ops::AttentionOut acc{Tensor::zeros({q.dim(0), q.dim(1), q.dim(2), v.dim(3)}, DType::f32, q.device()),
                        empty_lse(q.dim(0), q.dim(2), q.dim(1), q.device())};
  Tensor k_cur = k, v_cur = v;
  const int steps = plan.fault == Fault::ring_skip_step ? members - 1 : members;
  for (int step = 0; step < steps; ++step) {
    const int src = (me - step + members) % members;  // whose K/V block this is
    Tensor k_next, v_next;
    std::vector<RequestPtr> inflight;
    if (step + 1 < members) inflight = pass_on(*ring, {&k_cur, &v_cur}, {&k_next, &v_next}, kTagK);
    const ops::AttentionMask mask = plan.mask(me, src);
    if (computes(plan, mask)) {
      ScopedTimer timer(compute_seconds(plan.stats), compute_clock_on(q.device()));
      ops::AttentionOut part = ops::attention_block_forward(q, k_cur, v_cur, mask, DType::f32, plan.impl);
      count_work(plan.stats, part.scores, mask, q, k_cur);
      if (plan.fault == Fault::lse_add) merge_adding_lse(acc.out, acc.lse, part.out, part.lse);
      else ops::attention_merge(acc.out, acc.lse, part.out, part.lse);
    }
    wait_all(inflight);
    if (step + 1 < members) k_cur = k_next, v_cur = v_next;
  }
  return acc;
}

ops::AttentionGrads ring_backward(Communicator* ring, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& dout, const Tensor& lse, const Tensor& delta,
                                  const BlockPlan& plan) {
  const int members = ring ? ring->size() : 1, me = ring ? ring->rank() : 0;
  const Device device = q.device();
  ops::AttentionGrads grads{Tensor::zeros(q.shape(), DType::f32, device), {}, {}};
  Tensor k_cur = k, v_cur = v;
  // f32 [b, n, hk, d] and [b, n, hk, dv]: the accumulators of the block held last step
  Tensor dk_acc = Tensor::zeros(k.shape(), DType::f32, device), dv_acc = Tensor::zeros(v.shape(), DType::f32, device);
  const int steps = plan.fault == Fault::ring_skip_step ? members - 1 : members;
  for (int step = 0; step < steps; ++step) {
    const int src = (me - step + members) % members;
    Tensor k_next, v_next, dk_in, dv_in;
    std::vector<RequestPtr> inflight;
    if (step + 1 < members) inflight = pass_on(*ring, {&k_cur, &v_cur}, {&k_next, &v_next}, kTagK);
    if (step > 0)  // last step's accumulators move on with their block, which the next member now holds
      for (RequestPtr& r : pass_on(*ring, {&dk_acc, &dv_acc}, {&dk_in, &dv_in}, kTagDk))
        inflight.push_back(std::move(r));
    Tensor dk_step = Tensor::zeros(k.shape(), DType::f32, device),
           dv_step = Tensor::zeros(v.shape(), DType::f32, device);
    const ops::AttentionMask mask = plan.mask(me, src);
    if (computes(plan, mask)) {
      ScopedTimer timer(compute_seconds(plan.stats), compute_clock_on(device));
      const int64_t scores = ops::attention_block_backward_accumulate(q, k_cur, v_cur, out, dout, lse, delta, mask,
                                                                      grads.dq, dk_step, dv_step, plan.impl);
      count_work(plan.stats, scores, mask, q, k_cur);
    }
    wait_all(inflight);
    if (step > 0) {
      ScopedTimer timer(compute_seconds(plan.stats), compute_clock_on(device));
      add_into(dk_step, dk_in);
      add_into(dv_step, dv_in);
    }
    dk_acc = dk_step, dv_acc = dv_step;
    if (step + 1 < members) k_cur = k_next, v_cur = v_next;
  }
  // The accumulators now belong to the next member: one more hop takes them home.
  if (members > 1 && plan.fault != Fault::dkv_not_returned) {
    Tensor dk_home, dv_home;
    std::vector<RequestPtr> home = pass_on(*ring, {&dk_acc, &dv_acc}, {&dk_home, &dv_home}, kTagDk);
    wait_all(home);
    dk_acc = dk_home, dv_acc = dv_home;
    if (plan.fault == Fault::dkv_scale) {
      scale_planted(dk_acc, 1 + plan.fault_magnitude);
      scale_planted(dv_acc, 1 + plan.fault_magnitude);
    }
  }
  grads.dk = dk_acc, grads.dv = dv_acc;
  return grads;
}

}  // namespace sextant::cp
