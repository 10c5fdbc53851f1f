#include "kernels/moe/moe_faults.h"

namespace sextant::moe {

const FaultTable<Fault, FaultSite>& faults() {
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
      });
  return table;
}

}  // namespace sextant::moe
