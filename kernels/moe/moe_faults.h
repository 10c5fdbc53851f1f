// The planted faults of the MoE layer (docs/CONFORMANCE.md: a check is only
// as good as the faults it catches), each a bug a real implementation could
// have, as one table (harness/fault_table.h). MoeOptions::fault carries one
// into the layer, which hands the dispatcher and the router their part.
#pragma once

#include "harness/fault_table.h"
#include "kernels/moe/moe_types.h"

namespace sextant::moe {

enum class Fault {
  none,
  wrong_rank,        // alltoall: a row goes to the neighbour of its expert's rank
  combine_no_probs,  // expert outputs summed without the routing probabilities
  unpermute_order,   // grouped rows unpermuted as if they were in token order
  no_edp_reduce,     // expert gradients not summed over EDP
  capacity_drop,     // capacity keeps the slots it should drop
};

// What a config of the MoE layer looks like to its faults.
struct FaultSite {
  DispatcherKind dispatcher = DispatcherKind::alltoall;
  int topk = 1;
  bool pre_softmax = false;
  DropPolicy drop = DropPolicy::none;
  int ep = 1, edp = 1;
};

const FaultTable<Fault, FaultSite>& faults();

}  // namespace sextant::moe
