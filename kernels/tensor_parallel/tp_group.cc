#include "kernels/tensor_parallel/tp_group.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::tp {

const FaultTable<Fault, FaultSite>& faults() {
  static const FaultTable<Fault, FaultSite> table(
      "tensor-parallel",
      {
          {Fault::skip_input_grad_reduce, "skip_input_grad_reduce",
           "column-parallel backward: dx stays a partial sum (no all-reduce / reduce-scatter)", "TP of 2+",
           [](const FaultSite& s) { return s.tp > 1; }},
          {Fault::reduce_scatter_wrong_dim, "reduce_scatter_wrong_dim",
           "the SP reduce-scatter splits the hidden dimension instead of the sequence", "TP of 2+ with SP",
           [](const FaultSite& s) { return s.tp > 1 && s.sp; }},
          {Fault::layernorm_wrong_axis, "layernorm_wrong_axis",
           "SP LayerNorm: statistics over the shard's tokens per feature, not over the hidden dim",
           "a LayerNorm under TP of 2+ with SP", [](const FaultSite& s) { return s.tp > 1 && s.sp && s.layernorm; }},
          {Fault::cross_entropy_local_max, "cross_entropy_local_max",
           "vocab-parallel cross-entropy: each rank shifts by its own max (no max all-reduce)",
           "the vocab-parallel loss under TP of 2+", [](const FaultSite& s) { return s.tp > 1 && s.vocab; }},
      });
  return table;
}

}  // namespace sextant::tp
