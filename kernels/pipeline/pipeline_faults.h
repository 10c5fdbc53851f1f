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

const FaultTable<Fault, FaultSite>& faults();

}  // namespace sextant::pp
