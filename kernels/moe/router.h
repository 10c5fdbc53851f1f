// The MoE router (Megatron moe/router.py, moe_utils.py), in f32 whatever the
// storage dtype (Megatron's moe_router_dtype=fp32):
//
//   logits     l = x W_r                                          [T, E]
//   scores     s = softmax(l) over all E experts                  [T, E]
//   top-k      the k largest logits of a token (ties: lower expert index)
//   probs      softmax over the k selected logits (default), or
//              s at the selected experts (pre_softmax: softmax, then top-k)
//   capacity   C = ceil(G k / E * cf) slots per expert within each group of
//              G consecutive tokens (Megatron: G = the rank's local tokens,
//              get_capacity(num_tokens * topk, ...)); over capacity keep the
//              C highest probabilities (ties: lower token) or the first C
//              tokens (position). A dropped slot contributes nothing.
//   aux loss   coeff * E * sum_i f_i P_i   (Switch): f_i = slots routed to i
//              before dropping / (T k), P_i = sum_t s_ti / T
//   z loss     coeff * sum_t logsumexp(l_t)^2 / T
//
// T is the whole layer batch (the tokens of every rank in the token group):
// the router all-reduces E counts, E score sums and the z sum over that group,
// so both losses are the same numbers at every rank count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/comm.h"
#include "harness/tensor.h"
#include "kernels/moe/moe_types.h"

namespace sextant::moe {

struct RouterOptions {
  int experts = 8;
  int topk = 2;
  bool pre_softmax = false;
  DropPolicy drop = DropPolicy::none;  // none: dropless
  double capacity_factor = 1.0;        // used unless dropless
  int64_t capacity_group = 0;          // tokens that compete for a capacity (0: all local tokens)
  double aux_coeff = 0;
  double z_coeff = 0;
  bool fault_wrong_drop = false;  // planted (moe_faults.h capacity_drop): capacity keeps the slots it should drop
};

// Slots per expert for a group of `group_tokens` tokens: ceil(group_tokens * topk / experts * cf).
int64_t expert_capacity(int64_t group_tokens, int topk, int experts, double capacity_factor);

// Per token and choice j < k: the chosen expert, its probability and whether
// capacity kept it. Slot index t * k + j.
struct SlotTable {
  int64_t tokens = 0;
  int topk = 0;
  std::vector<int32_t> expert;
  std::vector<float> prob;
  std::vector<uint8_t> kept;
  int64_t slots() const { return tokens * topk; }
};

struct Routing {
  SlotTable slots;
  int experts = 0;
  Tensor logits;           // [T, E] f32
  Tensor scores;           // [T, E] f32, softmax over all experts
  std::vector<float> lse;  // [T] logsumexp of each token's logits
  // Whole layer batch (after the all-reduce over the token group).
  int64_t global_tokens = 0;
  std::vector<double> routed_fraction;  // f_i [E]
  std::vector<double> mean_score;       // P_i [E]
  double aux_loss = 0, z_loss = 0;
  int64_t dropped = 0;  // slots capacity dropped on this rank
};

// x: [T, h] (any float dtype); w: [h, E] (any float dtype). Collective over
// `tokens`: every rank that holds tokens of the layer batch.
Routing route(const Tensor& x, const Tensor& w, const RouterOptions& options, Communicator& tokens);

// dprob: [T * k], dLoss/dprob per slot (0 where dropped). Returns dLoss/dlogits
// [T, E] f32 including the aux and z loss terms.
Tensor router_logits_grad(const Routing& routing, const std::vector<float>& dprob, const RouterOptions& options);

}  // namespace sextant::moe
