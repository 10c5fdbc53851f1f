// Stage 2 of cp_attention.h: the KV exchange over the kv group, for the rows
// a rank holds. Inputs and outputs of one member:
//   q: [b, n, hq, d];  k: [b, n, hk, d];  v: [b, n, hk, dv];  dout: [b, n, hq, dv]
//   (storage dtype; dv = d but for MLA)
//   out: [b, n, hq, dv] f32;  lse, delta: [b, hq, n] f32;  dq, dk, dv f32 like q, k, v.
// The backward's out is the final output in the storage dtype, read by
// cuDNN's blocks only (an empty tensor when plan.impl is own).
// A null group means a group of one: the rank attends to its own rows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/comm.h"
#include "kernels/attention/cp_faults.h"
#include "kernels/attention/cp_types.h"
#include "kernels/ops/attention_block.h"

namespace sextant::cp {

// Global positions of the rows of every kv-group member, in member order.
using MemberPositions = std::vector<std::vector<int64_t>>;

// What every block computation of a stage needs.
struct BlockPlan {
  bool causal = false;
  MemberPositions positions;
  MemberPositions sequences;  // packed: the sequence of every row (attention_block.h); empty otherwise
  Fault fault = Fault::none;
  double fault_magnitude = 0;
  Stats* stats = nullptr;
  ops::AttentionImpl impl = ops::AttentionImpl::own;
  ops::Window window;  // sliding window of every mask (attention_mask.h)

  // Mask of member q_member's queries against member k_member's keys.
  ops::AttentionMask mask(int q_member, int k_member) const;
  // Mask of member q_member's queries against the keys of all members in order.
  ops::AttentionMask mask_all(int q_member) const;
};

// Adds one block's work to stats (may be null): its score entries computed
// and its visible pairs (q: [b, sq, hq, d], k: [b, sk, hk, d]).
void count_work(Stats* stats, int64_t scores, const ops::AttentionMask& mask, const Tensor& q, const Tensor& k);

ops::AttentionOut ring_forward(Communicator* ring, const Tensor& q, const Tensor& k, const Tensor& v,
                               const BlockPlan& plan);
ops::AttentionGrads ring_backward(Communicator* ring, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& dout, const Tensor& lse, const Tensor& delta,
                                  const BlockPlan& plan);

ops::AttentionOut allgather_forward(Communicator& group, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const BlockPlan& plan);
ops::AttentionGrads allgather_backward(Communicator& group, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& dout, const Tensor& lse, const Tensor& delta,
                                       const BlockPlan& plan);

}  // namespace sextant::cp
