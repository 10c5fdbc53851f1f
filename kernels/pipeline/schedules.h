// The pipeline schedules as one table: name, generator, the sizes each
// accepts, the chunk counts the sweeps run and the closed-form bubble. The
// pipeline suite (one case per row), the 6D step (--set schedule), the
// planner's step cost and the simulator's tests read it. The rows sit in
// generators.cc next to the generators, so a new schedule is an id here and
// its generator and row there.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/pipeline/schedule.h"

namespace sextant::pp {

enum class ScheduleId { gpipe, one_f_one_b, interleaved, zb_h1, zb_v, dualpipe_v };

struct ScheduleInfo {
  ScheduleId id;
  const char* name;  // as --set schedule takes it, and the pipeline case's name
  const char* summary;
  std::vector<int> chunks;         // chunks per rank (v) the sweeps run; a pinned --vpp overrides
  const char* chunk_rule;          // why v must be chunks[0]; nullptr: any v >= 1
  bool needs_full_pipeline;        // m >= p: its steady state (and closed form) needs it
  int min_microbatches_per_stage;  // the pipeline suite sweeps m >= this * p
  Schedule (*generate)(int p, int m, int v);
  void (*check_sizes)(const char* name, int p, int m, int v);  // its own rules beyond the chunk rule (or null)
  double (*closed_form_bubble)(int p, int m, int v);           // idle fraction of the step; NaN where none holds
};

// Every generated schedule, in listing order (defined in generators.cc).
const std::vector<ScheduleInfo>& schedules();
const ScheduleInfo& schedule_info(ScheduleId id);
std::vector<std::string> schedule_names();
std::optional<ScheduleId> find_schedule(const std::string& name);
// UsageError "--schedule NAME is not one of ..." for an unknown name.
ScheduleId parse_schedule(const std::string& name);

// The sizes a schedule needs (UsageError naming the rule): p, m, v
// positive, v as its chunk rule says, and its own rules (interleaved
// m % p == 0, dualpipe-v m >= 2p).
void validate_schedule_request(ScheduleId id, int p, int m, int v);
Schedule make_schedule(ScheduleId id, int p, int m, int v);
// Chunks per rank the schedule runs when the config asks for vpp.
int chunks_per_rank(ScheduleId id, int vpp);
double closed_form_bubble(ScheduleId id, int p, int m, int v);

}  // namespace sextant::pp
