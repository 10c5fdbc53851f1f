// The runner end to end on a toy suite: sweeps over rank counts, checks,
// timing, errors that stay on one rank, and validation before running.
#include "harness/runner.h"

#include <gtest/gtest.h>

#include "harness/error.h"
#include "harness/testing/mpi_world.h"

namespace sextant {
namespace {

using testing::world;

struct Toy {
  Communicator* comm = nullptr;
  Tensor x;
  bool fail_setup_on_last = false;
};

// "toy/sum": all-reduce of rank-dependent values, checked exactly.
Registry toy_registry() {
  Registry r;
  CaseTable<Toy> t;
  t.suite = "toy";
  t.name = "sum";
  t.faults = {{"toy", "off_by_one", "adds one to the sum", "every config"}};
  t.options = {OptionSpec::integer("n", -100, 100, "elements"), OptionSpec::boolean("explode", "setup throws")};
  t.configs = [](const SweepRequest& req) {
    CaseConfig c;
    c.ranks = req.ranks;
    c.parallel.dp = req.ranks;
    c.params = {{"n", req.get<int64_t>("n", 8)}, {"explode", req.get<bool>("explode", false)}};
    return std::vector<CaseConfig>{c};
  };
  t.validate = [](const CaseConfig& c) { require(c.i("n") > 0, "--set n must be positive"); };
  t.setup = [](CaseContext& ctx) {
    if (ctx.config.b("explode") && ctx.comm.rank() == ctx.comm.size() - 1)
      throw RuntimeError("setup exploded on the last rank");
    Toy s;
    s.comm = &ctx.comm;
    s.x = Tensor::zeros({ctx.config.i("n")}, DType::f32);
    return s;
  };
  t.timed = {{"run", [](Toy& s) { s.comm->all_reduce(s.x); }}};
  t.check = [fault = std::string()](Toy& s, Checker& c) {
    for (int64_t i = 0; i < s.x.numel(); ++i) s.x.set(i, s.comm->rank() + i);
    s.comm->all_reduce(s.x);
    const int n = s.comm->size();
    int64_t wrong = 0;
    for (int64_t i = 0; i < s.x.numel(); ++i) wrong += s.x.at(i) != n * (n - 1) / 2.0 + n * i;
    c.exact("sum", wrong, s.x.numel());
  };
  t.metrics = [](Toy&, const RegionTimes& times) {
    static const MetricDef& kT = define_metric({"test", "t", "s", Better::lower, "the run region's median"});
    Metrics m;
    m.add(kT, times.at("run").median);
    return m;
  };
  r.add(make_case(std::move(t)));
  return r;
}

TEST(Runner, PlansEveryRankCountAndValidatesFirst) {
  Registry r = toy_registry();
  RunOptions o;
  auto plan = plan_run(r, o, 8);
  EXPECT_EQ(plan_rank_counts(plan), (std::vector<int>{1, 2, 4, 8}));
  o.rank_counts = {1, 3};
  EXPECT_EQ(plan_rank_counts(plan_run(r, o, 4)), (std::vector<int>{1, 3}));
  o.rank_counts = {16};
  EXPECT_THROW(plan_run(r, o, 8), UsageError);
  o.rank_counts = {};
  o.options["n"] = -1;
  EXPECT_THROW(plan_run(r, o, 8), UsageError);
  o.options = nlohmann::json::object();
  o.selection = {"nope"};
  EXPECT_THROW(plan_run(r, o, 8), UsageError);
  o.selection = {};
  o.fault = "unknown";
  EXPECT_THROW(plan_run(r, o, 8), UsageError);
  o.fault = "";
  o.parallel = ParallelConfig{2, 1, 1, 1};
  EXPECT_THROW(plan_run(r, o, 8), UsageError) << "pinned config of 2 ranks in a world of 8";
}

TEST(Runner, RunsChecksAndTimesAtEveryRankCount) {
  MpiCommunicator& w = world();
  Registry r = toy_registry();
  RunOptions o;
  o.timing = {1, 3};
  std::vector<CaseRecord> records = execute_plan(plan_run(r, o, w.size()), w, o, {});
  if (w.rank() != 0) return;
  ASSERT_EQ(records.size(), plan_rank_counts(plan_run(r, o, w.size())).size());
  for (const CaseRecord& rec : records) {
    EXPECT_EQ(rec.conformance.status, "pass") << rec.config.id();
    EXPECT_EQ(rec.conformance.wrong, 0);
    EXPECT_EQ(rec.conformance.checked, 8 * rec.config.ranks);
    EXPECT_EQ(rec.times.at("run").iters, 3);
    EXPECT_TRUE(rec.metrics.contains("t"));
    EXPECT_TRUE(rec.metrics.contains("bytes_sent_per_rank"));
    EXPECT_TRUE(rec.error.empty());
  }
}

TEST(Runner, AnErrorOnOneRankFailsTheCaseWithoutHanging) {
  MpiCommunicator& w = world();
  Registry r = toy_registry();
  RunOptions o;
  o.rank_counts = {w.size()};
  o.options["explode"] = true;
  std::vector<CaseRecord> records = execute_plan(plan_run(r, o, w.size()), w, o, {});
  if (w.rank() != 0) return;
  ASSERT_EQ(records.size(), 1u);
  EXPECT_NE(records[0].error.find("setup exploded on the last rank"), std::string::npos) << records[0].error;
  EXPECT_EQ(records[0].conformance.status, "fail");
}

}  // namespace
}  // namespace sextant
