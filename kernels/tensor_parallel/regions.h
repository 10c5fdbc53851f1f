// The communication at the edges of the tensor-parallel region (Megatron's
// mappings.py). A transformer sublayer is
//   [outside: LayerNorm, residual] -> enter -> column-parallel linear -> ...
//   -> row-parallel linear -> exit -> [outside]
// and the two edges are conjugate pairs, forward and backward:
//
//                   enter (before column-parallel)   exit (after row-parallel)
//   without SP      f: identity   | all-reduce        g: all-reduce   | identity
//   with SP         all-gather    | reduce-scatter    reduce-scatter  | all-gather
//                   (along the sequence)
//
// With SP the activations outside the region are [b, s/tp, h] instead of a
// replicated [b, s, h]; all-gather + reduce-scatter move the same bytes as
// the all-reduce they replace (all-reduce = reduce-scatter + all-gather).
//
// Replicated parameters outside the region (LayerNorm gamma/beta, the
// row-parallel bias) see only this rank's tokens under SP: their gradients
// are partial sums and must be all-reduced over TP (all_reduce_grads); without
// SP every TP rank computes the same full gradient and nothing is reduced.
#pragma once

#include <vector>

#include "kernels/tensor_parallel/tp_group.h"

namespace sextant::tp {

// Sequence-dimension collectives (dim 1 of [b, s, ...]), any group size.
// shard: [b, s/n, ...] -> [b, s, ...], rank r's shard at tokens [r s/n, (r+1) s/n).
Tensor gather_sequence(Communicator& group, const Tensor& shard);
// full: [b, s, ...] partial sums -> [b, s/n, ...] this rank's tokens of the sum.
// fault reduce_scatter_wrong_dim splits the last dimension instead.
Tensor reduce_scatter_sequence(Communicator& group, const Tensor& full, Fault fault = Fault::none);

// x: [b, s/tp, h] (SP) or [b, s, h] -> [b, s, h], the input of a column-parallel linear.
Tensor enter_region_forward(const TpGroup& g, const Tensor& x);
// dx: [b, s, h] this rank's partial input gradient -> summed over TP:
// [b, s/tp, h] (SP, reduce-scatter) or [b, s, h] (all-reduce, in dx's storage).
Tensor enter_region_backward(const TpGroup& g, Tensor dx);
// y: [b, s, h] this rank's partial output of a row-parallel linear -> summed:
// [b, s/tp, h] (SP, reduce-scatter) or [b, s, h] (all-reduce, in y's storage).
Tensor exit_region_forward(const TpGroup& g, Tensor y);
// dy: [b, s/tp, h] (SP) or [b, s, h] -> [b, s, h] (all-gather or identity).
Tensor exit_region_backward(const TpGroup& g, const Tensor& dy);

// Sums each gradient over `group` in place (a no-op on one rank).
void all_reduce_grads(Communicator& group, const std::vector<Tensor*>& grads);
// Under SP: all_reduce_grads over TP of the replicated parameters' partial
// gradients (see above). Without SP: nothing (they are complete already).
void reduce_sequence_parallel_grads(const TpGroup& g, const std::vector<Tensor*>& replicated_grads);

}  // namespace sextant::tp
