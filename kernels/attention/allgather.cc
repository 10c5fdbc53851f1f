// All-gather attention (Llama 3 style): every member gathers the K/V blocks
// of all members, attends its own queries to the whole gathered sequence,
// and in backward reduce-scatters the dK/dV of every block to its owner.
// Simple and exact; it holds the whole K/V at once, where the ring holds two
// blocks.
#include "harness/timing.h"
#include "kernels/attention/kv_exchange.h"
#include "kernels/attention/permute.h"

namespace sextant::cp {

namespace {

// x: [b, n, h, d] on every member -> [b, P n, h, d], members in order.
Tensor gather_rows(Communicator& group, const Tensor& x) {
  const int64_t p = group.size(), b = x.dim(0), n = x.dim(1), h = x.dim(2), d = x.dim(3);
  Tensor stacked = Tensor::empty({p, b, n, h, d}, x.dtype(), x.device());  // [P, b, n, h, d]
  group.all_gather(x, stacked);
  return permute_rows(stacked, {p, b, n, h, d}, {1, 0, 2, 3, 4}).reshape({b, p * n, h, d});
}

// x: [b, P n, h, d] partial sums on every member -> this member's n rows,
// summed over the members: [b, n, h, d].
Tensor reduce_scatter_rows(Communicator& group, const Tensor& x) {
  const int64_t p = group.size(), b = x.dim(0), n = x.dim(1) / p, h = x.dim(2), d = x.dim(3);
  Tensor stacked = permute_rows(x, {b, p, n, h, d}, {1, 0, 2, 3, 4});  // [P, b, n, h, d]
  Tensor mine = Tensor::empty({b, n, h, d}, x.dtype(), x.device());
  group.reduce_scatter(stacked, mine);
  return mine;
}

}  // namespace

ops::AttentionOut allgather_forward(Communicator& group, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const BlockPlan& plan) {
  const Tensor k_all = gather_rows(group, k), v_all = gather_rows(group, v);  // [b, s, hk, d | dv]
  const ops::AttentionMask mask = plan.mask_all(group.rank());
  ScopedTimer timer(compute_seconds(plan.stats), compute_clock_on(q.device()));
  ops::AttentionOut out = ops::attention_block_forward(q, k_all, v_all, mask, DType::f32, plan.impl);
  count_work(plan.stats, out.scores, mask, q, k_all);
  return out;
}

ops::AttentionGrads allgather_backward(Communicator& group, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& dout, const Tensor& lse, const Tensor& delta,
                                       const BlockPlan& plan) {
  const Tensor k_all = gather_rows(group, k), v_all = gather_rows(group, v);  // [b, s, hk, d | dv]
  ops::AttentionGrads all{Tensor::zeros(q.shape(), DType::f32, q.device()),
                          Tensor::zeros(k_all.shape(), DType::f32, q.device()),
                          Tensor::zeros(v_all.shape(), DType::f32, q.device())};
  {
    const ops::AttentionMask mask = plan.mask_all(group.rank());
    ScopedTimer timer(compute_seconds(plan.stats), compute_clock_on(q.device()));
    const int64_t scores = ops::attention_block_backward_accumulate(q, k_all, v_all, out, dout, lse, delta, mask,
                                                                    all.dq, all.dk, all.dv, plan.impl);
    count_work(plan.stats, scores, mask, q, k_all);
  }
  return {all.dq, reduce_scatter_rows(group, all.dk), reduce_scatter_rows(group, all.dv)};
}

}  // namespace sextant::cp
