// Generators: shapes of the published schedules, placement, and that every
// generated schedule passes the validator over a grid of sizes.
#include "kernels/pipeline/generators.h"
#include "kernels/pipeline/schedules.h"

#include <gtest/gtest.h>

#include "kernels/pipeline/validate.h"

namespace sextant::pp {
namespace {

using T = ActionType;

// Forwards before the first backward on a rank.
int leading_forwards(const std::vector<Action>& list) {
  int n = 0;
  while (n < static_cast<int>(list.size()) && list[n].type == T::F) ++n;
  return n;
}

std::string joined(const std::vector<Action>& list) {
  std::string s;
  for (const Action& a : list) s += (s.empty() ? "" : " ") + to_string(a);
  return s;
}

TEST(Generators, EveryScheduleValidatesOverAGridOfSizes) {
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 5, 8, 12, 16, 32}) {
      std::vector<std::pair<std::string, int>> cases{{"gpipe", 1}, {"1f1b", 1}, {"zb-h1", 1}, {"zb-v", 2}};
      if (m % p == 0)
        for (int v : {1, 2, 3, 4}) cases.push_back({"interleaved", v});
      if (m >= 2 * p) cases.push_back({"dualpipe-v", 2});
      for (const auto& [name, v] : cases) {
        Schedule s = make_schedule(parse_schedule(name), p, m, v);
        EXPECT_NO_THROW(validate(s)) << name << " p" << p << " m" << m << " v" << v;
        EXPECT_EQ(s.stages, p * v);
      }
    }
}

TEST(Generators, GpipeRunsAllForwardsFirst) {
  Schedule s = gpipe(3, 4);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(leading_forwards(s.actions[r]), 4);
    EXPECT_EQ(s.actions[r].size(), 8u);
  }
}

TEST(Generators, OneFOneBWarmsUpWithPMinusRankMinusOne) {
  // As Megatron-LM's 1F1B (megatron/core/pipeline_parallel/schedules.py):
  // warm-up forwards on rank r are min(p - r - 1, m); the first
  // backward follows one more forward (steady F, B pairs).
  for (int m : {2, 8}) {
    Schedule s = one_f_one_b(4, m);
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(leading_forwards(s.actions[r]), std::min(4 - r - 1, m) + (m > 4 - r - 1)) << "m" << m << " rank " << r;
  }
  EXPECT_EQ(joined(one_f_one_b(2, 3).actions[0]), "0F0 0F1 0B0 0F2 0B1 0B2");
  EXPECT_EQ(joined(one_f_one_b(2, 3).actions[1]), "1F0 1B0 1F1 1B1 1F2 1B2");
}

TEST(Generators, InterleavedFollowsMegatronGroupingAndPlacement) {
  Schedule s = interleaved_1f1b(2, 4, 2);
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1, 0, 1}));  // round-robin
  // Rank 0: warm-up (p - r - 1) * 2 + (v - 1) * p = 4 virtual microbatches:
  // chunk 0 for microbatches 0, 1, then chunk 1 (stage 2) for 0, 1.
  EXPECT_EQ(joined(s.actions[0]), "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3");
  // Rank 1 (last): warm-up 2, the backward starts with the last chunk (stage 3).
  EXPECT_EQ(leading_forwards(s.actions[1]), 3);
  EXPECT_EQ(s.actions[1][3], (Action{3, T::B, 0}));
  // v = 1 is 1F1B.
  EXPECT_EQ(interleaved_1f1b(4, 8, 1).actions, one_f_one_b(4, 8).actions);
}

TEST(Generators, ZbH1DelaysWeightGradientsByRank) {
  Schedule s = zb_h1(4, 8);
  for (int r = 0; r < 4; ++r) {
    const auto& list = s.actions[r];
    EXPECT_EQ(leading_forwards(list), std::min(4 - r - 1, 8) + 1);
    // Up to rank r input gradients run before the first W.
    int inputs_before_w = 0;
    for (const Action& a : list) {
      if (a.type == T::W) break;
      inputs_before_w += a.type == T::I;
    }
    EXPECT_EQ(inputs_before_w, r + 1) << "rank " << r;
  }
  EXPECT_EQ(joined(zb_h1(2, 3).actions[1]), "1F0 1I0 1F1 1I1 1W0 1F2 1I2 1W1 1W2");
}

TEST(Generators, ZbVPlacesTwoChunksInAV) {
  Schedule s = zb_v(4, 8);
  EXPECT_EQ(s.stages, 8);
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(s.stages_of(r), (std::vector<int>{r, 7 - r}));
    EXPECT_EQ(leading_forwards(s.actions[r]), 2 * (4 - r) - 1 + 2 * r + 1) << "rank " << r;
  }
  // Fewer microbatches than the V needs: the order is cut, still valid.
  EXPECT_NO_THROW(validate(zb_v(4, 2)));
}

TEST(Generators, DualPipeVPairsForwardsWithBackwardsOfTheOtherChunk) {
  Schedule s = dualpipe_v(4, 8);
  EXPECT_EQ(s.stage_rank, zb_v(4, 8).stage_rank);
  // Rank 3 (the turn of the V) warms up F3 F4 pairs, then alternates.
  EXPECT_EQ(joined(std::vector<Action>(s.actions[3].begin(), s.actions[3].begin() + 12)),
            "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 3F4 4B0 4F4 3B0");
  // The drain splits backwards, so some W run last on every rank.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(s.actions[r].back().type, T::W) << "rank " << r;
}

TEST(Generators, BadSizesNameTheRule) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([] { make_schedule(ScheduleId::interleaved, 4, 6, 2); }),
            "--microbatches 6 must be divisible by --pp 4 for schedule interleaved (Megatron runs microbatches in "
            "groups of pp per chunk)");
  EXPECT_EQ(message([] { make_schedule(ScheduleId::zb_v, 4, 8, 3); }),
            "--vpp 3 must be 2 for schedule zb-v (two chunks per rank in a V)");
  EXPECT_EQ(
      message([] { make_schedule(ScheduleId::dualpipe_v, 4, 6, 2); }),
      "--microbatches 6 must be at least 2 * --pp = 8 for schedule dualpipe-v (DualPipe fills both arms of the V)");
  EXPECT_EQ(message([] { make_schedule(ScheduleId::one_f_one_b, 4, 8, 2); }),
            "--vpp 2 must be 1 for schedule 1f1b (one stage per rank)");
  EXPECT_EQ(message([] { parse_schedule("pipedream"); }).rfind("--schedule pipedream is not one of gpipe, 1f1b, ", 0),
            0u);
  EXPECT_EQ(message([] { make_schedule(ScheduleId::gpipe, 4, 0, 1); }), "--microbatches 0 must be positive");
  EXPECT_EQ(message([] { make_schedule(ScheduleId::one_f_one_b, 0, 4, 1); }), "--pp 0 must be positive");
}

}  // namespace
}  // namespace sextant::pp
