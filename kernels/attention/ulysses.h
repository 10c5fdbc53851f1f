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

// swapped plants the fault: each received block [n, h/A] is read as [h/A, n].
Tensor scatter_heads(Communicator& a2a, const Tensor& x, bool swapped = false);
Tensor gather_heads(Communicator& a2a, const Tensor& y);
Tensor scatter_heads_stat(Communicator& a2a, const Tensor& stat);
Tensor gather_heads_stat(Communicator& a2a, const Tensor& stat);

}  // namespace sextant::cp
