// What the watchdog says when a case runs past --timeout: which ranks are
// stuck and where every rank is, from two heartbeat reads a moment apart.
#pragma once

#include <string>
#include <vector>

#include "harness/heartbeat.h"

namespace sextant {

struct StallReport {
  std::vector<int> stuck;  // world ranks named as the cause
  std::string summary;     // "stuck: rank 1: case 7, phase check, in all_reduce (stopped: SIGSTOP or a debugger)"
  std::vector<std::string> ranks;  // one line per rank: where it is and whether it progressed
};

// `before` and `after` are reads of the same slots; `states` the process
// state of each slot (process_state). A rank is stuck when its process is
// stopped or gone, when it is behind the others (an earlier case), or when
// it made no progress outside any communicator call while others wait inside
// one. When no rank stands out, the summary says so (every rank waits in a
// call: mismatched calls or a hang in the communicator; or every rank
// progresses: the case is slow, not stuck).
StallReport analyze_stall(const std::vector<RankPosition>& before, const std::vector<RankPosition>& after,
                          const std::vector<char>& states);

// "in all_reduce", "after all_reduce" or "before any communicator call".
std::string describe_call(const RankPosition& p);

}  // namespace sextant
