// Schedule IR: the text and CSV forms and the grid.
#include "kernels/pipeline/schedule.h"

#include <gtest/gtest.h>

#include "kernels/pipeline/generators.h"
#include "kernels/pipeline/schedules.h"

namespace sextant::pp {
namespace {

TEST(ScheduleText, ActionsRoundTrip) {
  for (const Action& a : {Action{1, ActionType::F, 3}, Action{0, ActionType::B, 0}, Action{12, ActionType::I, 7},
                          Action{3, ActionType::W, 120}})
    EXPECT_EQ(parse_action(to_string(a), "test"), a) << to_string(a);
  EXPECT_EQ(to_string(Action{1, ActionType::F, 3}), "1F3");
  EXPECT_EQ(parse_action("2w5", "test"), (Action{2, ActionType::W, 5}));  // type letter in either case
}

TEST(ScheduleText, BadActionsNameWhereAndTheForm) {
  for (const char* bad : {"", "F3", "1X3", "1F", "1F3x", "-1F3", "1 F3", "1FF3"}) {
    try {
      parse_action(bad, "rank 2 step 5");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 2 step 5"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("e.g. 1F3"), std::string::npos) << e.what();
    }
  }
}

TEST(ScheduleCsv, RoundTripsEveryGenerator) {
  for (const ScheduleInfo& info : schedules()) {
    const std::string name = info.name;
    const int v = info.chunks.back();
    Schedule s = make_schedule(info.id, 4, 8, v);
    Schedule back = schedule_from_csv(to_csv(s));
    EXPECT_EQ(back.ranks, s.ranks) << name;
    EXPECT_EQ(back.stages, s.stages) << name;
    EXPECT_EQ(back.microbatches, s.microbatches) << name;
    EXPECT_EQ(back.stage_rank, s.stage_rank) << name;
    EXPECT_EQ(back.actions, s.actions) << name;
  }
}

TEST(ScheduleCsv, ReadsCommentsBlanksAndSpaces) {
  Schedule s = schedule_from_csv("# two ranks\n0F0, 0F1 ,0B0,0B1\n 1F0,1B0,,1F1,1B1\n\n");
  ASSERT_EQ(s.ranks, 2);
  EXPECT_EQ(s.stages, 2);
  EXPECT_EQ(s.microbatches, 2);
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1}));
  EXPECT_EQ(s.actions[1].size(), 4u);
  EXPECT_EQ(s.actions[1][2], (Action{1, ActionType::F, 1}));
  // Stated counts win over what the actions show (so a missing one is caught later).
  Schedule stated = schedule_from_csv("0F0,0B0\n1F0,1B0\n", 3, 2);
  EXPECT_EQ(stated.microbatches, 3);
}

TEST(ScheduleCsv, UnknownActionNamesRankAndStep) {
  try {
    schedule_from_csv("0F0,0B0\n1F0,1X0\n");
    FAIL() << "accepted 1X0";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("CSV rank 1 step 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'1X0'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(schedule_from_csv("# nothing\n\n"), UsageError);
}

TEST(ScheduleGrid, MarksTheFailingCell) {
  Schedule s = one_f_one_b(2, 2);
  const std::string grid = format_grid(s, {{1, 2}});
  EXPECT_NE(grid.find("rank 0"), std::string::npos);
  EXPECT_NE(grid.find("rank 1"), std::string::npos);
  EXPECT_NE(grid.find("[1F1]"), std::string::npos) << grid;  // rank 1 step 2
  EXPECT_EQ(grid.find("[0F0]"), std::string::npos) << grid;
  // A mark past the end of a row shows where a missing action would go.
  EXPECT_NE(format_grid(s, {{0, 4}}).find("[...]"), std::string::npos);
}

// GPipe keeps every microbatch; 1F1B keeps p - rank on rank `rank`
// (Narayanan et al. 2021); a split backward keeps them until the W.
TEST(ScheduleMemory, InFlightForwardsFollowTheSchedule) {
  const Schedule g = gpipe(4, 8), f = one_f_one_b(4, 8);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(g.max_in_flight(r), 8) << "gpipe rank " << r;
    EXPECT_EQ(f.max_in_flight(r), 4 - r) << "1f1b rank " << r;
  }
  EXPECT_EQ(one_f_one_b(4, 2).max_in_flight(0), 2);  // fewer microbatches than ranks
  EXPECT_EQ(one_f_one_b(1, 4).max_in_flight(0), 1);
  Schedule split = schedule_from_csv("0F0,0F1,0I0,0I1,0W0,0W1\n");
  EXPECT_EQ(split.max_in_flight(0), 2);
  Schedule early = schedule_from_csv("0F0,0I0,0W0,0F1,0I1,0W1\n");
  EXPECT_EQ(early.max_in_flight(0), 1);
  // Split backward: a forward's activations stay until its W, not its I.
  Schedule late = schedule_from_csv("0F0,0I0,0F1,0I1,0W0,0W1\n");
  EXPECT_EQ(late.max_in_flight(0), 2);
  EXPECT_EQ(late.max_deferred_weight_grads(0), 2);
  EXPECT_EQ(early.max_deferred_weight_grads(0), 1);
  EXPECT_EQ(f.max_deferred_weight_grads(0), 0);  // B computes the weight gradient
}

}  // namespace
}  // namespace sextant::pp
