// Types that the stages of context-parallel attention share with its entry
// point (cp_attention.h): how K/V are exchanged, and what a call did.
#pragma once

#include <cstdint>

namespace sextant::cp {

enum class KvExchange { ring, allgather };

// What a call did, accumulated over calls: compute is the attention math
// (block kernels, merges, accumulator adds) in CPU seconds of this process,
// so ranks sharing a core still report their own work; on a GPU, the compute
// stream's seconds timed with events.
struct Stats {
  double compute_s = 0;
  int64_t scores = 0;  // score entries computed (tiles not fully masked; includes masked waste)
  int64_t pairs = 0;   // visible (query, key) pairs x batch x heads: the work the layout hands out
  int64_t ring_steps = 0, ring_steps_skipped = 0;  // ring steps taken, and those whose block the mask hides wholly
};
// Where a compute timer adds its seconds (stats may be null: nowhere). The
// clock is compute_clock_on(device) (harness/timing.h): this process's CPU
// seconds on the host, the compute stream's time between events on a GPU.
inline double* compute_seconds(Stats* stats) { return stats ? &stats->compute_s : nullptr; }

}  // namespace sextant::cp
