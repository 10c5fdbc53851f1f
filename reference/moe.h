// The MoE layer in float64, token by token and expert by expert:
//
//   l_t  = x_t W_r                       s_t = softmax(l_t) over all E experts
//   the k largest logits of t (ties: lower expert index; or another run's
//     choice where that is a top k within tie_band, see MoeConfig::follow),
//     with probabilities
//     p_tj = softmax over the k selected logits, or s_t at them (pre_softmax)
//   capacity: within each group of G consecutive tokens, expert e keeps
//     C = ceil(G k / E * cf) of its slots: the highest p (ties: lower token)
//     or the first tokens (position); the others are dropped
//   y_t  = sum over kept j of p_tj * W2_e^T gelu(W1_e^T x_t)      e = expert of slot j
//   aux  = aux_coeff * E * sum_i f_i P_i,  f_i = slots routed to i (before
//          dropping) / (T k),  P_i = sum_t s_ti / T
//   z    = z_coeff * sum_t logsumexp(l_t)^2 / T
//
// The backward is of L = <dy, y> + aux + z.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/tensor.h"

namespace sextant::ref {

enum class MoeDrop { none, probability, position };

struct MoeConfig {
  int experts = 8;
  int topk = 2;
  bool pre_softmax = false;
  MoeDrop drop = MoeDrop::none;
  double capacity_factor = 1.0;
  int64_t capacity_group = 0;  // tokens per capacity group (0: all tokens)
  double aux_coeff = 0;
  double z_coeff = 0;
  // Another run's routing, [T * k] expert ids (null: none). Where it chose
  // other experts for token t, and its choice is a top k of this run's
  // logits to within tie_band x max_j |l_tj| (every chosen logit at least
  // the largest unchosen one less that band), this run takes it: both are
  // right to within the other run's rounding, and following it keeps the
  // two runs' gradients comparable. Outside the band the own choice stands.
  const std::vector<int>* follow = nullptr;
  double tie_band = 0;
};

struct MoeParams {
  Tensor router;  // [h, E]
  Tensor w1;      // [E, h, ffn]
  Tensor w2;      // [E, ffn, h]
};

struct MoeRouting {
  int64_t tokens = 0;
  int topk = 0;
  std::vector<int> expert;    // [T * k] by descending logit
  std::vector<double> prob;   // [T * k]
  std::vector<char> kept;     // [T * k]
  std::vector<int64_t> load;  // [E] kept slots per expert
  int64_t dropped = 0;
  int64_t followed = 0;  // tokens whose experts came from MoeConfig::follow
};

struct MoeResult {
  Tensor y;       // [T, h]
  Tensor logits;  // [T, E]
  double aux_loss = 0, z_loss = 0;
  MoeRouting routing;
};

struct MoeGradients {
  Tensor dx;       // [T, h]
  Tensor drouter;  // [h, E]
  Tensor dw1;      // [E, h, ffn]
  Tensor dw2;      // [E, ffn, h]
};

// x: [T, h] (any float dtype: its rounded values are the input).
Tensor moe_router_logits(const Tensor& x, const Tensor& router);
MoeRouting moe_route(const Tensor& logits, const MoeConfig& config);
MoeResult moe_forward(const Tensor& x, const MoeParams& params, const MoeConfig& config);
MoeGradients moe_backward(const Tensor& dy, const Tensor& x, const MoeParams& params, const MoeConfig& config);

}  // namespace sextant::ref
