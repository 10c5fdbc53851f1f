// Schedule validator: proves a schedule (generated or loaded from CSV) is
// complete, respects the data dependencies and cannot deadlock, before
// anything runs. Rules, checked in this order:
//   placement   every stage sits on one rank in [0, p); every action runs on
//               the rank its stage is placed on; stage and microbatch in range
//   coverage    every (stage, microbatch) has exactly one F and exactly one
//               full backward: one B, or one I and one W
//   local order on one rank an action comes after everything it depends on
//               that runs on the same rank (B/I after its own F, W after its
//               I, and the neighbouring stage's action when both share a rank)
//   deadlock    a dry run with the executor's point-to-point semantics:
//               receives block, sends do not (isend, completed at the end of
//               the step). No rank may wait forever.
// Dependencies: F(s) after F(s-1); B/I(s) after F(s) and after the B or I of
// stage s+1; W(s) after I(s).
// A violation throws ScheduleError: a one-line message naming the rule, rank
// and step, and the grid with the failing step(s) marked.
#pragma once

#include <vector>

#include "kernels/pipeline/schedule.h"

namespace sextant::pp {

// Position of an action in a schedule.
struct Step {
  int rank = -1;
  int step = -1;
  bool found() const { return rank >= 0; }
};

// Where each action of a schedule sits, and what it waits for. Needs stages
// and microbatches in range (validate() checks that first); when an action
// appears twice the index keeps the first.
class ScheduleIndex {
 public:
  explicit ScheduleIndex(const Schedule& schedule);

  Step find(const Action& action) const;
  // The action that produces the gradient stage `stage` receives for
  // `microbatch`: B or I of stage + 1 (whichever the schedule runs).
  Action gradient_producer(int stage, int microbatch) const;
  // Everything that must finish before `action` starts (missing ones are
  // returned with found() false).
  std::vector<std::pair<Action, Step>> dependencies(const Action& action) const;

 private:
  size_t key(const Action& a) const;
  const Schedule& schedule_;
  std::vector<Step> where_;
};

void validate(const Schedule& schedule);

}  // namespace sextant::pp
