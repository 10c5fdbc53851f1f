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
  wrong_rank,               // alltoall: a row goes to the neighbour of its expert's rank
  combine_no_probs,         // expert outputs summed without the routing probabilities
  unpermute_order,          // grouped rows unpermuted as if they were in token order
  no_edp_reduce,            // expert gradients not summed over EDP
  capacity_drop,            // capacity keeps the slots it should drop
  neighbour_slot,           // peer memory: a rank's first row is written into the next row's slot
  weights_before_exchange,  // peer memory: EP rank 0 weighs the rows before the exchange and after
};

// What a config of the MoE layer looks like to its faults.
struct FaultSite {
  DispatcherKind dispatcher = DispatcherKind::alltoall;
  int topk = 1;
  bool pre_softmax = false;
  DropPolicy drop = DropPolicy::none;
  int ep = 1, edp = 1;
  bool peer_memory = false;  // the alltoall rows move through peer memory (Transport)
};

inline const FaultTable<Fault, FaultSite>& faults() {
  static const FaultTable<Fault, FaultSite> table(
      "moe",
      {
          {Fault::wrong_rank, "wrong_rank", "the all-to-all sends a row to the neighbour of its expert's rank",
           "the alltoall dispatcher over 2+ EP ranks",
           [](const FaultSite& s) { return s.dispatcher == DispatcherKind::alltoall && s.ep > 1; }},
          {Fault::combine_no_probs, "combine_no_probs", "combine sums expert outputs without routing probabilities",
           "top-k > 1 or pre-softmax (top-1 softmax makes every probability 1)",
           [](const FaultSite& s) { return s.topk > 1 || s.pre_softmax; }},
          {Fault::unpermute_order, "unpermute_order", "grouped rows unpermuted as if they were in token order",
           "every config"},
          {Fault::no_edp_reduce, "no_edp_reduce", "expert gradients not summed over EDP", "EDP of 2+",
           [](const FaultSite& s) { return s.edp > 1; }},
          {Fault::capacity_drop, "capacity_drop", "capacity keeps the slots it should drop", "capacity mode",
           [](const FaultSite& s) { return s.drop != DropPolicy::none; }},
          {Fault::neighbour_slot, "neighbour_slot",
           "peer memory: each rank writes its first dispatched row into the next row's slot",
           "the alltoall dispatcher over peer memory", [](const FaultSite& s) { return s.peer_memory; }},
          {Fault::weights_before_exchange, "weights_before_exchange",
           "peer memory: EP rank 0 weighs the expert outputs before the exchange as well as after",
           "the alltoall dispatcher over peer memory, top-k > 1 or pre-softmax",
           [](const FaultSite& s) { return s.peer_memory && (s.topk > 1 || s.pre_softmax); }},
      });
  return table;
}

}  // namespace sextant::moe
