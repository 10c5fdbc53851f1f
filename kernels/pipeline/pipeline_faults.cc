#include "kernels/pipeline/pipeline_faults.h"

namespace sextant::pp {

namespace {
bool messages(const FaultSite& s) { return s.pp >= 2; }
}  // namespace

const FaultTable<Fault, FaultSite>& faults() {
  static const FaultTable<Fault, FaultSite> table(
      "pipeline",
      {
          {Fault::missing_backward, "missing_backward",
           "the last pipeline rank loses one microbatch's backward (the validator refuses it)", "every config"},
          {Fault::deadlock, "deadlock",
           "stage 0 waits for microbatch 0's gradient before sending microbatch 1's activation, which stage 1 "
           "wants first (the validator refuses it)",
           "--pp >= 2 and --microbatches >= 2", [](const FaultSite& s) { return s.pp >= 2 && s.microbatches >= 2; }},
          {Fault::wrong_peer, "wrong_peer", "the executor sends rank 0's first activation to the wrong rank",
           "--pp >= 2 (messages between pipeline ranks)", messages},
          {Fault::eager_receives, "eager_receives",
           "every rank posts all its receives before its first action (fine under MPI's tags, a hang on NCCL: the "
           "executor's dry run refuses it)",
           "--pp >= 2 (messages between pipeline ranks)", messages},
          {Fault::accumulate_twice, "accumulate_twice", "W of microbatch 0 adds its weight gradients twice",
           "every config"},
      });
  return table;
}

}  // namespace sextant::pp
