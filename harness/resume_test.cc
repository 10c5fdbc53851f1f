// Resuming: the plan must match, finished cases are skipped by id, and the
// merged records come back in plan order.
#include "harness/resume.h"

#include <gtest/gtest.h>

#include "harness/error.h"

namespace sextant {
namespace {

std::vector<PlannedCase> toy_plan(int count) {
  std::vector<PlannedCase> plan;
  for (int i = 0; i < count; ++i) {
    CaseConfig c;
    c.suite = "toy";
    c.name = "sum";
    c.ranks = 1 + i % 2;
    c.parallel.dp = c.ranks;
    c.params = {{"n", i}};
    plan.push_back({.def = nullptr, .config = c});
  }
  return plan;
}

RunSnapshot finished(const std::vector<PlannedCase>& plan, const std::vector<int>& which, nlohmann::json plan_json) {
  RunSnapshot s;
  s.plan = std::move(plan_json);
  for (int i : which) s.cases.push_back({{"id", plan[i].config.id()}, {"n", i}});
  return s;
}

TEST(Resume, AcceptsTheSamePlanAndSkipsFinishedCases) {
  RunOptions o;
  auto plan = toy_plan(5);
  nlohmann::json now = describe_plan(o, plan, 2, "mpi");
  EXPECT_EQ(now["cases"], 5);
  EXPECT_EQ(now["options"]["ranks"], (std::vector<int>{1, 2}));
  RunSnapshot s = finished(plan, {0, 3}, nlohmann::json::parse(now.dump()));  // through text, as from a file
  EXPECT_NO_THROW(require_same_plan(s, now, "--resume", "f.json"));
  std::vector<PlannedCase> missing = missing_cases(plan, s);
  ASSERT_EQ(missing.size(), 3u);
  EXPECT_EQ(missing[0].config.id(), plan[1].config.id());
  EXPECT_EQ(missing[2].config.id(), plan[4].config.id());
}

TEST(Resume, RefusesAnotherPlanNamingTheDifference) {
  RunOptions o;
  auto plan = toy_plan(4);
  const nlohmann::json file_plan = describe_plan(o, plan, 2, "mpi");
  auto refused = [&](const nlohmann::json& now, const std::string& expected) {
    try {
      require_same_plan(finished(plan, {0}, file_plan), now, "--resume", "f.json");
      ADD_FAILURE() << "accepted, expected: " << expected;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line";
    }
  };
  refused(describe_plan(o, plan, 4, "mpi"), "--resume 'f.json': its run had world size 2, this run 4");
  RunOptions other_seed = o;
  other_seed.seed = 7;
  refused(describe_plan(other_seed, plan, 2, "mpi"), "its run had seed 1234, this run 7");
  RunOptions other_iters = o;
  other_iters.timing.iters = 1;
  refused(describe_plan(other_iters, plan, 2, "mpi"), "its run had iters 10, this run 1");
  refused(describe_plan(o, plan, 2, "mpi-staged"), "its run had backend mpi, this run mpi-staged");
  auto shorter = toy_plan(3);
  refused(describe_plan(o, shorter, 2, "mpi"), "its run planned 4 case instances, this run 3");
  auto renamed = toy_plan(4);
  renamed[2].config.params["n"] = 99;
  refused(describe_plan(o, renamed, 2, "mpi"), "other case instances");

  RunSnapshot old_file;
  try {
    require_same_plan(old_file, file_plan, "--resume", "f.json");
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("has no run.plan"), std::string::npos) << e.what();
  }
}

TEST(Resume, MergesOldAndNewRecordsInPlanOrder) {
  auto plan = toy_plan(4);
  nlohmann::json old_cases = {{{"id", plan[2].config.id()}, {"from", "old"}},
                              {{"id", plan[0].config.id()}, {"from", "old"}}};
  nlohmann::json new_cases = {{{"id", plan[1].config.id()}, {"from", "new"}},
                              {{"id", plan[3].config.id()}, {"from", "new"}}};
  nlohmann::json merged = in_plan_order(plan, old_cases, new_cases);
  ASSERT_EQ(merged.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(merged[i]["id"], plan[i].config.id());
  EXPECT_EQ(merged[0]["from"], "old");
  EXPECT_EQ(merged[1]["from"], "new");
}

}  // namespace
}  // namespace sextant
