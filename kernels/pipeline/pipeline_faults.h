// The planted faults of a pipeline (docs/CONFORMANCE.md: a check is only as
// good as the faults it catches), as one table (harness/fault_table.h):
//   schedule faults   the validator must refuse the schedule before anything
//                     runs (missing_backward, deadlock);
//   executor faults   the executor misplaces messages (wrong_peer), or posts
//                     them in an order NCCL would hang on (eager_receives),
//                     which its dry run refuses;
//   compute faults    the stages add a gradient twice (accumulate_twice),
//                     which the check must catch.
// The executor reads ExecutorOptions::fault; the pipeline suite plants the
// schedule and compute faults itself.
#pragma once

#include "harness/fault_table.h"

namespace sextant::pp {

enum class Fault {
  none,
  missing_backward,  // the last pipeline rank loses one microbatch's backward
  deadlock,          // stage 0 waits for microbatch 0's gradient before sending microbatch 1's activation
  wrong_peer,        // the executor sends rank 0's first activation astray
  eager_receives,    // every rank posts all its receives before its first action
  accumulate_twice,  // W of microbatch 0 adds its weight gradients twice
};

// What a pipeline config looks like to its faults.
struct FaultSite {
  int pp = 1;
  int microbatches = 1;
};

namespace rules {
inline bool messages(const FaultSite& s) { return s.pp >= 2; }
}  // namespace rules

inline const FaultTable<Fault, FaultSite>& faults() {
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
           "--pp >= 2 (messages between pipeline ranks)", rules::messages},
          {Fault::eager_receives, "eager_receives",
           "every rank posts all its receives before its first action (fine under MPI's tags, a hang on NCCL: the "
           "executor's dry run refuses it)",
           "--pp >= 2 (messages between pipeline ranks)", rules::messages},
          {Fault::accumulate_twice, "accumulate_twice", "W of microbatch 0 adds its weight gradients twice",
           "every config"},
      });
  return table;
}

}  // namespace sextant::pp
