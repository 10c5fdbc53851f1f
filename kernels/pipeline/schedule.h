// Pipeline schedule IR: for each pipeline rank an ordered list of actions.
//
//   F  forward of one stage (model chunk) for one microbatch
//   B  full backward (input and weight gradients together)
//   I  backward for the input gradient only   (zero-bubble split: B = I + W)
//   W  backward for the weight gradient only
//
// A stage is a model chunk; `stage_rank` places each stage on a rank (one
// stage per rank for GPipe / 1F1B, round-robin for interleaved, a V for
// ZB-V). Sends and receives are implied by stage adjacency: F of stage s
// consumes the activation of stage s-1, B/I of stage s consumes the gradient
// of stage s+1; when both stages sit on one rank the hand-off is local.
//
// Text form of an action, as torch.distributed.pipelining prints it:
// <stage><type><microbatch>, e.g. "1F3" = stage 1 forward of microbatch 3.
// CSV form: one row per rank (row r = rank r), one action per cell; empty
// cells are ignored, lines starting with '#' are comments.
#pragma once

#include <string>
#include <vector>

#include "harness/error.h"

namespace sextant::pp {

enum class ActionType { F, B, I, W };

char type_letter(ActionType type);  // 'F', 'B', 'I', 'W'

struct Action {
  int stage = 0;
  ActionType type = ActionType::F;
  int microbatch = 0;
  bool operator==(const Action&) const = default;
};

std::string to_string(const Action& action);  // "1F3"
// Parses "1F3"; throws UsageError naming `where` (e.g. "rank 2 step 5").
Action parse_action(const std::string& text, const std::string& where);

struct Schedule {
  std::string name;                          // "1f1b", "zb-v", "csv", ...
  int ranks = 0;                             // p
  int stages = 0;                            // model chunks in all (p * v)
  int microbatches = 0;                      // m
  std::vector<int> stage_rank;               // [stages] -> rank holding the stage
  std::vector<std::vector<Action>> actions;  // [ranks] -> actions in order

  int chunks_per_rank() const { return ranks > 0 ? stages / ranks : 0; }
  bool is_first(int stage) const { return stage == 0; }
  bool is_last(int stage) const { return stage == stages - 1; }
  // Stages held by `rank`, ascending.
  std::vector<int> stages_of(int rank) const;
  size_t max_steps() const;  // longest action list
  // The most (stage, microbatch) forwards whose activations `rank` holds at
  // once: an F keeps them until its B, or its W where the backward is split
  // (the weight gradient reads the saved inputs).
  int max_in_flight(int rank) const;
  // The most input-gradient backwards (I) on `rank` whose weight gradient
  // (W) is still to run: each keeps its output gradients until its W.
  int max_deferred_weight_grads(int rank) const;
};

// CSV, one row per rank.
std::string to_csv(const Schedule& schedule);
// Parses a user schedule. Stages, microbatches and placement are taken from
// the actions (a stage belongs to the rank whose row runs it); pass
// `microbatches` > 0 / `stages` > 0 to state the expected counts, so that a
// microbatch or stage missing everywhere is caught by validate(). Throws
// UsageError naming the rank and step of a bad cell.
Schedule schedule_from_csv(const std::string& text, int microbatches = 0, int stages = 0);

// A readable grid: one row per rank, one column per step. Cells listed in
// `marks` ({rank, step}) are bracketed, e.g. [1B3]; step -1 marks the row.
struct GridMark {
  int rank = 0;
  int step = 0;
};
std::string format_grid(const Schedule& schedule, const std::vector<GridMark>& marks = {});

// A schedule that breaks a rule. A one-line message (what() names the rule,
// rank and step) plus the printable grid with the failing step(s) marked,
// which the CLI and the suite print. A UsageError: exit code 2.
class ScheduleError : public UsageError {
 public:
  ScheduleError(const std::string& message, std::string grid, std::vector<GridMark> marks)
      : UsageError(message), grid_(std::move(grid)), marks_(std::move(marks)) {}
  const std::string& grid() const { return grid_; }
  const std::vector<GridMark>& marks() const { return marks_; }
  std::string details() const override { return grid_; }

 private:
  std::string grid_;
  std::vector<GridMark> marks_;
};

}  // namespace sextant::pp
