#include "kernels/attention/dynamic_cp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "harness/error.h"
#include "kernels/attention/packing.h"

namespace sextant::cp {
namespace {

TEST(DynamicCp, GroupIsTheSmallestPowerOfTwoThatHoldsTheSequence) {
  EXPECT_EQ(group_for(1, 64, 8), 1);
  EXPECT_EQ(group_for(64, 64, 8), 1);
  EXPECT_EQ(group_for(65, 64, 8), 2);
  EXPECT_EQ(group_for(200, 64, 8), 4);
  EXPECT_EQ(group_for(512, 64, 8), 8);
  EXPECT_THROW(group_for(513, 64, 8), RuntimeError);
}

// Every rank's bins in execution order never overlap in model time, and the
// schedule's order is one total order: each rank's list is a subsequence.
void expect_valid(const Schedule& s, int ranks, const std::vector<int64_t>& lengths, int64_t capacity) {
  std::vector<int> seen(lengths.size(), 0);
  for (const Bin& b : s.bins) {
    for (int i : b.sequences) ++seen[i];
    EXPECT_LE(b.tokens, b.group * capacity);
    EXPECT_EQ(b.tokens, std::accumulate(b.sequences.begin(), b.sequences.end(), int64_t{0},
                                        [&](int64_t sum, int i) { return sum + lengths[i]; }));
  }
  for (int n : seen) EXPECT_EQ(n, 1);
  ASSERT_EQ(s.order.size(), s.bins.size());
  for (int r = 0; r < ranks; ++r) {
    double end = 0;
    for (const Placement& p : s.placements_of(r)) {
      EXPECT_EQ(p.first_rank % s.bins[p.bin].group, 0) << "groups are aligned blocks";
      EXPECT_GE(p.start, end - 1e-9) << "rank " << r;
      end = p.end;
    }
  }
}

TEST(DynamicCp, ShortSequencesRunOnOneRankLongOnesOnTheGroupTheyNeed) {
  const std::vector<int64_t> lengths = {256, 10, 20, 30, 40, 50, 60, 130, 5, 15};
  const int64_t capacity = 64;  // static CP 4 over sequences of up to 256
  const Schedule s = dynamic_schedule(lengths, capacity, 4);
  expect_valid(s, 4, lengths, capacity);
  for (const Bin& b : s.bins) EXPECT_EQ(b.group, group_for(b.longest, capacity, 4));
  // 256 alone on 4 ranks, 130 on 4 (needs 3 -> 4), the rest packed into bins of one rank.
  int ones = 0;
  for (const Bin& b : s.bins) ones += b.group == 1 ? 1 : 0;
  EXPECT_GE(ones, 4);  // 230 short tokens in bins of at most 64
}

// Same work: a long-tailed batch finishes earlier with dynamic groups once
// ring steps cost something, and its ranks are busier; full-length
// sequences leave nothing to gain.
TEST(DynamicCp, LongTailedBatchesGainFullLengthOnesDoNot) {
  const int cp = 4;
  const int64_t seq = 256, capacity = seq / cp;
  const CostModel cost{200.0};
  std::vector<int64_t> lengths;
  std::vector<std::vector<int>> microbatches;
  for (uint64_t mb = 0; mb < 4; ++mb) {
    std::vector<int> mine;
    for (int64_t n : zipf_lengths(8, seq, 100 + mb))
      mine.push_back(static_cast<int>(lengths.size())), lengths.push_back(n);
    microbatches.push_back(mine);
  }
  const Schedule fixed = static_schedule(microbatches, lengths, cp, 1, cost);
  const Schedule dynamic = dynamic_schedule(lengths, capacity, cp, cost);
  expect_valid(fixed, cp, lengths, capacity);
  expect_valid(dynamic, cp, lengths, capacity);
  int64_t pairs_static = 0, pairs_dynamic = 0;
  for (const Bin& b : fixed.bins) pairs_static += bin_pairs(b, lengths);
  for (const Bin& b : dynamic.bins) pairs_dynamic += bin_pairs(b, lengths);
  EXPECT_EQ(pairs_static, pairs_dynamic);
  EXPECT_LT(dynamic.makespan, fixed.makespan);

  const std::vector<int64_t> full = {seq, seq, seq, seq};
  const Schedule full_static = static_schedule({{0}, {1}, {2}, {3}}, full, cp, 1, cost);
  const Schedule full_dynamic = dynamic_schedule(full, capacity, cp, cost);
  EXPECT_DOUBLE_EQ(full_dynamic.makespan, full_static.makespan);
  for (const Bin& b : full_dynamic.bins) EXPECT_EQ(b.group, cp);
}

TEST(DynamicCp, StaticScheduleSharesMicrobatchesOverDpGroups) {
  const std::vector<int64_t> lengths = {64, 64, 64, 64};
  const Schedule s = static_schedule({{0}, {1}, {2}, {3}}, lengths, 2, 2);
  expect_valid(s, 4, lengths, 64);
  for (double f : s.busy_fraction()) EXPECT_DOUBLE_EQ(f, 1.0);
  EXPECT_EQ(s.placements_of(0).size(), 2u);
  EXPECT_EQ(s.placements_of(3).size(), 2u);
  EXPECT_THROW(dynamic_schedule(lengths, 64, 6), RuntimeError);
}

}  // namespace
}  // namespace sextant::cp
