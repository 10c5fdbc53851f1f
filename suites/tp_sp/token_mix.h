// The stand-in for core attention in case attn_proj: a per-head function of
// each token's own q, k, v (no mixing across tokens, so only the projections
// around it are under test; core attention belongs to the attention suite):
//   o = q * k + v                  element-wise, [b, s, heads, d]
//   dq = do * k, dk = do * q, dv = do
#pragma once

#include "kernels/tensor_parallel/attention_proj.h"

namespace sextant::tp_sp {

// Test dtype: f32 compute, rounded once on store; host or device tensors.
Tensor token_mix_forward(const tp::Qkv& qkv);
tp::Qkv token_mix_backward(const tp::Qkv& qkv, const Tensor& dout);

// Float64, for the reference.
Tensor token_mix_forward_f64(const Tensor& q, const Tensor& k, const Tensor& v);
void token_mix_backward_f64(const Tensor& q, const Tensor& k, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace sextant::tp_sp
