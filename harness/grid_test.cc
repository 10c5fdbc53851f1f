#include "harness/grid.h"

#include <gtest/gtest.h>

#include <set>

#include "harness/error.h"

namespace sextant {
namespace {

using Ranks = std::vector<int>;

// A worked example on 16 ranks, Megatron-Core semantics
// (megatron/core/parallel_state.py, RankGenerator).
TEST(RankGrid, WorkedExampleWorld16) {
  ParallelConfig c;
  c.tp = 2, c.cp = 2, c.dp = 2, c.pp = 2, c.etp = 1, c.ep = 4;
  RankGrid g(c, 16);
  RankCoords r = g.coords(13);
  EXPECT_EQ(r.tp, 1);
  EXPECT_EQ(r.cp, 0);
  EXPECT_EQ(r.dp, 1);
  EXPECT_EQ(r.pp, 1);
  EXPECT_EQ(g.group(Dim::tp, 13), (Ranks{12, 13}));
  EXPECT_EQ(g.group(Dim::cp, 13), (Ranks{13, 15}));
  EXPECT_EQ(g.group(Dim::dp, 13), (Ranks{9, 13}));
  EXPECT_EQ(g.group(Dim::pp, 13), (Ranks{5, 13}));
  EXPECT_EQ(c.edp(), 2);
  EXPECT_EQ(r.ep, 1);
  EXPECT_EQ(r.edp, 1);
  EXPECT_EQ(g.group(Dim::ep, 13), (Ranks{12, 13, 14, 15}));
  EXPECT_EQ(g.group(Dim::edp, 13), (Ranks{9, 13}));
  EXPECT_EQ(g.group(Dim::dp_cp, 13), (Ranks{9, 11, 13, 15}));
}

// Independent restatement of the closed forms of the order tp-cp-ep-dp-pp
// (leftmost fastest), checked for every rank of many configs: tp = r % TP,
// cp = (r / TP) % CP, ...
TEST(RankGrid, MatchesTheClosedFormsForManyConfigs) {
  for (int tp : {1, 2, 4})
    for (int cp : {1, 2})
      for (int dp : {1, 2, 3})
        for (int pp : {1, 2}) {
          ParallelConfig c;
          c.tp = tp, c.cp = cp, c.dp = dp, c.pp = pp;
          const int world = tp * cp * dp * pp;
          RankGrid g(c, world);
          std::set<int> tp_group_starts;
          for (int r = 0; r < world; ++r) {
            RankCoords k = g.coords(r);
            ASSERT_EQ(k.tp, r % tp);
            ASSERT_EQ(k.cp, (r / tp) % cp);
            ASSERT_EQ(k.dp, (r / (tp * cp)) % dp);
            ASSERT_EQ(k.pp, r / (tp * cp * dp));
            // A group along X: ranks that differ from r only in coordinate X.
            for (Dim d : {Dim::tp, Dim::cp, Dim::dp, Dim::pp}) {
              Ranks members = g.group(d, r);
              for (int m : members) {
                RankCoords o = g.coords(m);
                ASSERT_EQ(o.tp == k.tp || d == Dim::tp, true);
                ASSERT_EQ(o.cp == k.cp || d == Dim::cp, true);
                ASSERT_EQ(o.dp == k.dp || d == Dim::dp, true);
                ASSERT_EQ(o.pp == k.pp || d == Dim::pp, true);
              }
              int expect = d == Dim::tp ? tp : d == Dim::cp ? cp : d == Dim::dp ? dp : pp;
              ASSERT_EQ(static_cast<int>(members.size()), expect);
              ASSERT_EQ(members[g.index_in_group(d, r)], r);
            }
          }
          // Groups of one dimension partition the world.
          for (Dim d : {Dim::tp, Dim::cp, Dim::dp, Dim::pp, Dim::dp_cp}) {
            std::set<int> seen;
            for (const Ranks& grp : g.groups(d))
              for (int m : grp) ASSERT_TRUE(seen.insert(m).second);
            ASSERT_EQ(static_cast<int>(seen.size()), world);
          }
        }
}

TEST(RankGrid, ExpertLayoutFoldsIntoTheDenseOneWithTheSamePipelineGroups) {
  ParallelConfig c;
  c.tp = 2, c.cp = 2, c.dp = 2, c.pp = 2, c.ep = 2;  // etp defaults to tp
  RankGrid g(c, 16);
  EXPECT_EQ(c.expert_tp(), 2);
  EXPECT_EQ(c.edp(), 2);
  for (int r = 0; r < 16; ++r) {
    RankCoords k = g.coords(r);
    EXPECT_EQ(k.etp, r % 2);
    EXPECT_EQ(k.ep, (r / 2) % 2);
    EXPECT_EQ(k.edp, (r / 4) % 2);
    EXPECT_EQ(g.group(Dim::etp, r), g.group(Dim::tp, r));
  }
}

TEST(RankGrid, RejectsBadConfigsWithOneLineRules) {
  ParallelConfig c;
  c.tp = 2, c.cp = 2, c.dp = 1;
  try {
    validate(c, 8);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "world size 8 must equal tp*cp*pp*dp = 2*2*1*1 = 4");
  }
  c.dp = 2;
  c.ep = 3;
  EXPECT_THROW(validate(c, 8), UsageError);  // 2*3 does not divide 8
  c.ep = 1;
  c.order = "tp-cp-dp-pp";
  EXPECT_THROW(validate(c, 8), UsageError);  // ep missing from the order
  // With pp before dp and etp != tp, the expert layout's PP stride differs.
  ParallelConfig folded;
  folded.tp = 2, folded.pp = 2, folded.dp = 2, folded.ep = 2, folded.etp = 1;
  folded.order = "tp-pp-cp-ep-dp";
  EXPECT_THROW(RankGrid(folded, 8), UsageError);
  folded.order = "tp-cp-ep-dp-pp";
  EXPECT_NO_THROW(RankGrid(folded, 8));
  EXPECT_THROW(parse_dim("xp"), UsageError);
}

TEST(RankGrid, OtherOrdersPermuteStrides) {
  ParallelConfig c;
  c.tp = 2, c.dp = 2;
  c.order = "tp-dp-cp-ep-pp";
  RankGrid g(c, 4);
  EXPECT_EQ(g.group(Dim::dp, 0), (Ranks{0, 2}));
  c.order = "dp-tp-cp-ep-pp";
  RankGrid h(c, 4);
  EXPECT_EQ(h.group(Dim::dp, 0), (Ranks{0, 1}));
  EXPECT_EQ(h.group(Dim::tp, 0), (Ranks{0, 2}));
}

}  // namespace
}  // namespace sextant
