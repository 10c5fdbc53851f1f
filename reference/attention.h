// Float64 reference attention over the whole sequence: plain softmax, no
// blocking, no LSE tricks, no shared kernel code. It reads like the math:
//   S = Q K^T / sqrt(d)  (d: the head dim of q and k; causal: S_ij = -inf
//   for j > i; a sliding window (left, right) also for j < i - left and
//   j > i + right)
//   P = softmax_j(S),  O = P V,  LSE_i = log sum_j exp(S_ij)
//   dV = P^T dO,  dP = dO V^T,  dS_ij = P_ij (dP_ij - sum_l P_il dP_il),
//   dQ = dS K / sqrt(d),  dK = dS^T Q / sqrt(d).
// Grouped-query attention: query head h reads kv head h / (hq / hk); the
// gradients of a kv head sum over the query heads that read it.
//
// Inputs may be any dtype (the test dtype's rounded values); results are f64.
// Shapes: q [b, s, hq, d]; k [b, s, hk, d]; v [b, s, hk, dv]; out, dout
// [b, s, hq, dv]; lse [b, hq, s]. dv is d but for multi-head latent
// attention (MLA), whose values are narrower than its queries and keys.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/tensor.h"

namespace sextant::ref {

// A sliding window: query i sees keys [i - left, i + right]; -1 leaves a
// side unbounded. {n}: a causal window of n keys before the query.
struct Window {
  int64_t left = -1, right = -1;
};

struct AttentionResult {
  Tensor out;  // [b, s, hq, dv]
  Tensor lse;  // [b, hq, s]
};
AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, Window window = {});

struct AttentionGradients {
  Tensor dq;  // [b, s, hq, d]
  Tensor dk;  // [b, s, hk, d]
  Tensor dv;  // [b, s, hk, dv]
};
AttentionGradients attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                      bool causal, Window window = {});

// Spot check for sequences too long for the whole reference: the query rows
// at sequence positions `rows` (every batch and head), each computed from its
// own row of scores, O(s d) per row.
struct AttentionRows {
  Tensor out;  // [b, rows, hq, dv]
  Tensor lse;  // [b, hq, rows]
  Tensor dq;   // [b, rows, hq, d]
};
AttentionRows attention_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, bool causal,
                             const std::vector<int64_t>& rows, Window window = {});

}  // namespace sextant::ref
