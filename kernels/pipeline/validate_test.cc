// Validator: each rule rejects a schedule that breaks it, with a one-line
// message naming the rule, rank and step, and a grid with the step marked.
#include "kernels/pipeline/validate.h"

#include <gtest/gtest.h>

#include "kernels/pipeline/generators.h"

namespace sextant::pp {
namespace {

using T = ActionType;

// The error validate() throws, or a failure when it accepts the schedule.
ScheduleError rejection(const Schedule& s) {
  try {
    validate(s);
  } catch (const ScheduleError& e) {
    return e;
  }
  ADD_FAILURE() << "validate accepted:\n" << format_grid(s);
  return ScheduleError("accepted", "", {});
}

void expect_mentions(const ScheduleError& e, const std::vector<std::string>& words) {
  const std::string message = e.what();
  EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  for (const std::string& w : words)
    EXPECT_NE(message.find(w), std::string::npos) << "'" << w << "' not in: " << message;
}

void erase(Schedule& s, int rank, const Action& a) {
  auto& list = s.actions[rank];
  list.erase(std::find(list.begin(), list.end(), a));
}

TEST(Validate, MissingBackwardOfOneMicrobatchOnOneStage) {
  // The suite's planted fault: 1F1B with stage 1's backward of microbatch 2 dropped.
  Schedule s = one_f_one_b(4, 8);
  erase(s, 1, {1, T::B, 2});
  ScheduleError e = rejection(s);
  expect_mentions(e, {"coverage", "stage 1 microbatch 2 on rank 1", "no backward", "1B2"});
  EXPECT_NE(e.grid().find("[...]"), std::string::npos) << e.grid();  // where it is missing
  ASSERT_EQ(e.marks().size(), 1u);
  EXPECT_EQ(e.marks()[0].rank, 1);
}

TEST(Validate, MissingForwardRepeatsAndMixedBackwards) {
  Schedule no_f = gpipe(2, 2);
  erase(no_f, 0, {0, T::F, 1});
  expect_mentions(rejection(no_f), {"coverage", "no forward 0F1"});

  Schedule twice = gpipe(2, 2);
  twice.actions[1].push_back({1, T::F, 0});
  expect_mentions(rejection(twice), {"coverage", "rank 1 step 4 repeats 1F0", "first at rank 1 step 0"});

  Schedule mixed = zb_h1(2, 2);
  mixed.actions[0].push_back({0, T::B, 1});
  expect_mentions(rejection(mixed), {"coverage", "both a full backward 0B1"});

  Schedule no_w = zb_h1(2, 2);
  erase(no_w, 1, {1, T::W, 0});
  expect_mentions(rejection(no_w), {"coverage", "has 1I0", "but no 1W0"});
}

TEST(Validate, PlacementAndRange) {
  Schedule wrong_rank = one_f_one_b(2, 2);
  wrong_rank.actions[0][0] = {1, T::F, 0};  // stage 1 lives on rank 1
  expect_mentions(rejection(wrong_rank), {"placement", "rank 0 step 0 (1F0)", "placed on rank 1"});

  Schedule out_of_range = one_f_one_b(2, 2);
  out_of_range.actions[1].push_back({1, T::F, 7});
  expect_mentions(rejection(out_of_range), {"coverage", "rank 1 step 4 (1F7)", "microbatches are 0..1"});
}

TEST(Validate, LocalOrder) {
  Schedule s = one_f_one_b(2, 3);
  std::swap(s.actions[1][0], s.actions[1][1]);  // 1B0 before 1F0
  ScheduleError e = rejection(s);
  expect_mentions(e, {"local order", "rank 1 step 0 runs 1B0 before 1F0 (step 1)"});
  EXPECT_NE(e.grid().find("[1B0]"), std::string::npos) << e.grid();
  EXPECT_NE(e.grid().find("[1F0]"), std::string::npos) << e.grid();

  Schedule w_first = zb_h1(2, 2);
  auto& list = w_first.actions[0];
  auto w = std::find(list.begin(), list.end(), Action{0, T::W, 0});
  list.insert(list.begin(), *w);
  list.erase(std::find(list.begin() + 1, list.end(), Action{0, T::W, 0}));
  expect_mentions(rejection(w_first), {"local order", "0W0 before 0I0"});
}

TEST(Validate, CrossRankCycleIsADeadlock) {
  // The suite's planted fault: rank 0 waits for 1B0 before sending 0F1,
  // while rank 1 runs 1F1 before 1B0 and so waits for 0F1.
  Schedule s = schedule_from_csv("0F0,0B0,0F1,0B1\n1F0,1F1,1B0,1B1\n");
  ScheduleError e = rejection(s);
  expect_mentions(e, {"deadlock", "rank 0 step 1 (0B0) waits for 1B0 (rank 1 step 2)",
                      "rank 1 step 1 (1F1) waits for 0F1 (rank 0 step 2)"});
  EXPECT_NE(e.grid().find("[0B0]"), std::string::npos) << e.grid();
  EXPECT_NE(e.grid().find("[1F1]"), std::string::npos) << e.grid();
  EXPECT_EQ(e.marks().size(), 2u);
}

TEST(Validate, DeadlockAcrossFourRanks) {
  // 1F1B on 4 ranks, but rank 0 runs each microbatch's backward right after
  // its forward: 0B0 waits for 1B0, rank 1 (still warming up) waits for 0F1.
  Schedule s = one_f_one_b(4, 8);
  s.actions[0].clear();
  for (int mb = 0; mb < 8; ++mb) {
    s.actions[0].push_back({0, T::F, mb});
    s.actions[0].push_back({0, T::B, mb});
  }
  ScheduleError e = rejection(s);
  expect_mentions(e, {"deadlock", "rank 0 step 1 (0B0) waits for 1B0 (rank 1 step 3)",
                      "rank 1 step 1 (1F1) waits for 0F1 (rank 0 step 2)", "rank 2 step 1 (2F1) waits for 1F1"});
  EXPECT_NE(e.grid().find("[0B0]"), std::string::npos) << e.grid();
  EXPECT_NE(e.grid().find("[1F1]"), std::string::npos) << e.grid();
}

TEST(Validate, CsvWithUnknownStageOrMissingMicrobatchEverywhere) {
  // Stated 3 microbatches but none of microbatch 2 runs anywhere.
  Schedule s = schedule_from_csv("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n", 3, 0);
  expect_mentions(rejection(s), {"coverage", "stage 0 microbatch 2 on rank 0", "no forward 0F2"});
  // A stage that no row runs.
  Schedule gap = schedule_from_csv("0F0,0B0\n2F0,2B0\n");
  expect_mentions(rejection(gap), {"stage 1 is run by no rank"});
}

}  // namespace
}  // namespace sextant::pp
