// Stage 1 of cp_attention.h: the Ulysses all-to-alls over an a2a group of A
// members (DeepSpeed-Ulysses). Before attention every member trades heads
// for sequence, after it the inverse trade restores the layout:
//   scatter_heads  [b, n, h, d]    -> [b, A n, h/A, d]
//   gather_heads   [b, A n, h/A, d] -> [b, n, h, d]
// Member a gets heads [a h/A, (a+1) h/A); the gathered rows are the members'
// rows in member order. Per-row statistics (LSE, D) follow the same trade:
//   scatter_heads_stat  [b, h, n] -> [b, h/A, A n];  gather_heads_stat: inverse.
#pragma once

#include "harness/comm.h"
#include "harness/tensor.h"

namespace sextant::cp {

// KV heads for an a2a group larger than them (TransformerEngine does the
// same when cp exceeds the KV heads): each KV head is repeated r times before
// the scatter, so that member a gets copy a % r of KV head a / r, the one its
// query heads read (query heads per member never exceed a KV head's group
// then). Gradients come back as r copies, summed into their head.
//   kv_replicas: 1 when A divides the KV heads, A / kv when kv divides A
//   (RuntimeError otherwise).
//   replicate_kv_heads [b, n, hk, d] -> [b, n, hk r, d] (copy j of head i at i r + j)
//   sum_kv_replicas    [b, n, hk r, d] -> [b, n, hk, d] f32 (first_only: the
//   planted fault, the first copy alone)
int64_t kv_replicas(int64_t a2a_size, int64_t kv_heads);
Tensor replicate_kv_heads(const Tensor& x, int64_t r);
Tensor sum_kv_replicas(const Tensor& g, int64_t r, bool first_only = false);

// swapped plants the fault: each received block [n, h/A] is read as [h/A, n].
Tensor scatter_heads(Communicator& a2a, const Tensor& x, bool swapped = false);
Tensor gather_heads(Communicator& a2a, const Tensor& y);
Tensor scatter_heads_stat(Communicator& a2a, const Tensor& stat);
Tensor gather_heads_stat(Communicator& a2a, const Tensor& stat);

}  // namespace sextant::cp
