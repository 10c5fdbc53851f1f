// Which rank the watchdog names as stuck, from heartbeat positions.
#include "harness/stall_report.h"

#include <gtest/gtest.h>

namespace sextant {
namespace {

RankPosition at(int rank, int case_index, const std::string& phase, const std::string& call, bool in_call,
                uint64_t sequence) {
  RankPosition p;
  p.world_rank = rank;
  p.pid = 1000 + rank;
  p.case_index = case_index;
  p.armed = true;
  p.phase = phase;
  p.call = call;
  p.in_call = in_call;
  p.sequence = sequence;
  return p;
}

TEST(StallReport, NamesAStoppedRank) {
  std::vector<RankPosition> ranks = {at(0, 7, "check", "all_reduce", true, 10),
                                     at(1, 7, "check", "all_reduce", true, 8)};
  StallReport r = analyze_stall(ranks, ranks, {'R', 'T'});
  EXPECT_EQ(r.stuck, std::vector<int>{1});
  EXPECT_EQ(r.summary, "stuck: rank 1: case 7, phase check, in all_reduce (stopped: SIGSTOP or a debugger)");
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_NE(r.ranks[0].find("rank 0 (pid 1000): case 7, phase check, in all_reduce; no progress"), std::string::npos)
      << r.ranks[0];
  EXPECT_NE(r.ranks[1].find("STUCK"), std::string::npos) << r.ranks[1];
}

TEST(StallReport, NamesTheRankOutsideAnyCallWhileOthersWait) {
  std::vector<RankPosition> ranks = {at(0, 3, "fwd", "wait recv from 1", true, 4),
                                     at(1, 3, "fwd", "all_gather", false, 6),
                                     at(2, 3, "fwd", "wait recv from 1", true, 4)};
  StallReport r = analyze_stall(ranks, ranks, {'R', 'R', 'S'});
  EXPECT_EQ(r.stuck, std::vector<int>{1});
  EXPECT_NE(r.summary.find("after all_gather"), std::string::npos) << r.summary;
}

TEST(StallReport, NamesARankBehindTheOthers) {
  std::vector<RankPosition> ranks = {at(0, 5, "setup", "split", true, 4), at(1, 4, "check", "barrier", true, 6)};
  StallReport r = analyze_stall(ranks, ranks, {'R', 'R'});
  EXPECT_EQ(r.stuck, std::vector<int>{1});
  EXPECT_NE(r.summary.find("behind"), std::string::npos) << r.summary;
}

TEST(StallReport, NamesNobodyWhenEveryRankWaitsInACall) {
  std::vector<RankPosition> ranks = {at(0, 2, "check", "all_reduce", true, 4),
                                     at(1, 2, "check", "all_to_all", true, 6)};
  StallReport r = analyze_stall(ranks, ranks, {'R', 'R'});
  EXPECT_TRUE(r.stuck.empty());
  EXPECT_NE(r.summary.find("no rank stands out"), std::string::npos) << r.summary;
}

TEST(StallReport, SaysSlowWhenEveryRankProgresses) {
  std::vector<RankPosition> before = {at(0, 2, "fwd", "all_reduce", false, 4), at(1, 2, "fwd", "all_reduce", true, 6)};
  std::vector<RankPosition> after = before;
  after[0].sequence += 2;
  after[1].sequence += 4;
  StallReport r = analyze_stall(before, after, {'R', 'R'});
  EXPECT_TRUE(r.stuck.empty());
  EXPECT_NE(r.summary.find("slow"), std::string::npos) << r.summary;
}

TEST(StallReport, NamesAGoneRankAndSkipsEmptySlots) {
  std::vector<RankPosition> ranks = {at(0, 2, "check", "all_reduce", true, 4), at(1, 2, "check", "", false, 2), {}};
  ranks[1].armed = false;  // between cases when it died
  StallReport r = analyze_stall(ranks, ranks, {'R', '?', '?'});
  EXPECT_EQ(r.stuck, std::vector<int>{1});
  EXPECT_NE(r.summary.find("gone"), std::string::npos) << r.summary;
  EXPECT_EQ(r.ranks.size(), 2u) << "the slot nobody took is not a rank";
}

}  // namespace
}  // namespace sextant
