// The collectives suite through the same registry the CLI uses: every op
// passes at every rank count, and every planted fault is caught.
#include <gtest/gtest.h>

#include "harness/comm_wrappers.h"
#include "harness/runner.h"
#include "harness/testing/suite_run.h"

namespace sextant {
namespace {

using namespace testing;  // world(), ci_options(), run_suite(): harness/testing/suite_run.h

RunOptions small(std::vector<std::string> selection = {"collectives"}) {
  RunOptions o = ci_options(std::move(selection));
  o.options["max_bytes"] = 16 * 1024;
  return o;
}

TEST(Collectives, EveryOpPassesExactlyAtEveryRankCount) {
  std::vector<CaseRecord> records = run_suite("collectives", small());
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.conformance.status, "pass") << r.config.id() << " " << r.error;
    EXPECT_EQ(r.conformance.wrong, 0) << r.config.id();
    EXPECT_GT(r.conformance.checked, 0) << r.config.id();
    EXPECT_TRUE(r.metrics.contains("busbw_GBps")) << r.config.id();
  }
}

// sendrecv's ring exchange under NCCL's point-to-point rules (no tags, one stream).
TEST(Collectives, SendRecvPassesUnderNcclRules) {
  std::vector<CaseRecord> records = run_suite_under_nccl_rules("collectives", small({"collectives/sendrecv"}));
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) EXPECT_EQ(r.conformance.status, "pass") << r.config.id() << " " << r.error;
}

TEST(Collectives, RunsOnEveryGroupOfADimensionAtOnce) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  RunOptions o = small({"collectives/all_reduce", "collectives/all_gather", "collectives/sp_identity"});
  o.parallel = ParallelConfig{2, 2, 1, 1};
  o.options["group"] = "tp";
  std::vector<CaseRecord> records = run_suite("collectives", o);
  if (world().rank() != 0) return;
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.conformance.status, "pass") << r.config.id();
    EXPECT_EQ(r.config.params["group_size"], 2);
    EXPECT_EQ(r.config.ranks, 4);
  }
}

// Each fault must fail the case it targets (a fault is invisible at one rank).
TEST(Collectives, EveryPlantedFaultIsCaught) {
  if (world().size() < 2) GTEST_SKIP() << "faults need two ranks";
  const std::map<std::string, std::vector<std::string>> targets = {
      {"allgather_order", {"collectives/all_gather", "collectives/sp_identity"}},
      {"drop_rank", {"collectives/all_reduce", "collectives/reduce_scatter", "collectives/sp_identity"}},
      {"a2a_order", {"collectives/all_to_all", "collectives/all_to_all_v"}},
      {"broadcast_root", {"collectives/broadcast"}}};
  for (const std::string& fault : comm_faults().names()) {
    RunOptions o = small(targets.at(fault));
    o.rank_counts = {world().size()};
    o.fault = fault;
    std::vector<CaseRecord> records = run_suite("collectives", o);
    if (world().rank() != 0) continue;
    ASSERT_FALSE(records.empty());
    for (const CaseRecord& r : records) {
      EXPECT_EQ(r.conformance.status, "fail") << fault << " was not caught by " << r.config.id();
      EXPECT_GT(r.conformance.wrong, 0) << r.config.id();
    }
  }
}

}  // namespace
}  // namespace sextant
