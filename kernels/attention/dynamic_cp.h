// Dynamic context parallelism: the scheduler. Static CP runs every packed
// microbatch on the full CP group, so a bin of short sequences is cut into
// 2 cp chunks per sequence and pays cp - 1 ring steps for little work.
// Dynamic CP (Megatron-Core's dynamic / hybrid context parallel) packs the
// sequences of a global batch into bins per group size and runs each bin on
// the smallest power-of-two group whose per-rank capacity holds its longest
// sequence, taken from the pool of dp x cp ranks; short sequences then run
// on one rank each, without padding or communication, beside the long ones.
//
// Pure functions, no communication: both schedules come from one list
// scheduler over aligned blocks of the pool (a group of g ranks is
// [k g, (k + 1) g), so groups of every size nest in the static CP groups).
// Bins are placed widest group first, then costliest first, each on the
// block of its size that frees up first; every
// rank then runs its bins in the schedule's order, one total order for all
// ranks, so blocking group calls cannot deadlock.
#pragma once

#include <cstdint>
#include <vector>

namespace sextant::cp {

// The scheduler's estimate of a bin's time on g ranks, in units of one
// causal (query, key) pair: pairs / g + ring_step * (g - 1). ring_step is
// the cost of one ring step (latency and synchronisation) in pair units.
struct CostModel {
  double ring_step = 0;
};

struct Bin {
  std::vector<int> sequences;  // indices into the batch's lengths, longest first
  int group = 1;               // CP group size it runs on
  int64_t tokens = 0;          // sum of its lengths
  int64_t longest = 0;
};

struct Placement {
  int bin = 0;
  int first_rank = 0;         // the group is ranks [first_rank, first_rank + group)
  double start = 0, end = 0;  // model time
};

struct Schedule {
  std::vector<Bin> bins;
  std::vector<Placement> order;  // the execution order: by start, then first rank, then bin
  std::vector<double> busy;      // per rank: model time spent in bins
  double makespan = 0;
  // Model busy fraction of each rank: busy / makespan.
  std::vector<double> busy_fraction() const;
  // The placements rank r takes part in, in execution order.
  std::vector<Placement> placements_of(int rank) const;
};

// The smallest power of two g <= max_group with g * capacity >= longest.
// Throws RuntimeError when even max_group cannot hold it.
int group_for(int64_t longest, int64_t capacity, int max_group);

// Causal pairs of a bin: sum over its sequences of L (L + 1) / 2.
int64_t bin_pairs(const Bin& bin, const std::vector<int64_t>& lengths);
double bin_cost(const Bin& bin, const std::vector<int64_t>& lengths, const CostModel& cost);

// Static CP: every microbatch (its sequence indices) is a bin on a full
// group of cp ranks; the dp groups take them by the list scheduler.
Schedule static_schedule(const std::vector<std::vector<int>>& microbatches, const std::vector<int64_t>& lengths, int cp,
                         int dp, const CostModel& cost = {});

// Dynamic CP over a pool of `ranks` (a power of two): every sequence needs
// group_for(length, capacity, ranks); sequences, longest first, go first-fit
// into a bin of their group size with room (group x capacity tokens), else
// open one; the bins are placed on the pool by the list scheduler.
Schedule dynamic_schedule(const std::vector<int64_t>& lengths, int64_t capacity, int ranks, const CostModel& cost = {});

}  // namespace sextant::cp
