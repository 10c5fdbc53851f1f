// Simulator against the closed forms (GPipe and 1F1B: Narayanan et al. 2021;
// ZB-H1 and ZB-V: Qi et al., "Zero Bubble Pipeline Parallelism", 2024).
#include "kernels/pipeline/simulate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/pipeline/generators.h"
#include "kernels/pipeline/schedules.h"
#include "kernels/pipeline/validate.h"

namespace sextant::pp {
namespace {

// F : I : W = 1 : 1 : 1 per stage (B = 2), no latency.
Simulation equal_costs(const Schedule& s, double latency = 0) {
  return simulate(s, CostModel::uniform(s.stages, 1, 1, 1, latency));
}

const int kPs[] = {2, 4, 8};

TEST(Simulate, OneFOneBAndGpipeBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (int p : kPs)
    for (int m : {1, p / 2, p, 2 * p, 4 * p}) {
      if (m < 1) continue;
      const double expected = (p - 1.0) / (m + p - 1.0);
      for (const Schedule& s : {one_f_one_b(p, m), gpipe(p, m)}) {
        Simulation sim = equal_costs(s);
        EXPECT_DOUBLE_EQ(sim.stats.makespan, 3.0 * (m + p - 1)) << s.name << " p" << p << " m" << m;
        for (int r = 0; r < p; ++r) EXPECT_NEAR(sim.stats.bubble[r], expected, 1e-12) << s.name << " rank " << r;
        EXPECT_NEAR(sim.stats.bubble_mean, closed_form_bubble(parse_schedule(s.name), p, m, 1), 1e-12);
      }
    }
}

TEST(Simulate, InterleavedDividesTheBubbleByV) {
  for (int p : kPs)
    for (int m : {p, 2 * p, 4 * p})
      for (int v : {2, 4}) {
        // Costs per chunk: a chunk is 1/v of the model, F = 1, B = 2.
        Simulation sim = equal_costs(interleaved_1f1b(p, m, v));
        const double expected = (p - 1.0) / (v * m + p - 1.0);
        EXPECT_NEAR(sim.stats.bubble_max, expected, 1e-12) << "p" << p << " m" << m << " v" << v;
        EXPECT_NEAR(closed_form_bubble(ScheduleId::interleaved, p, m, v), expected, 1e-15);
        // Against 1F1B on the same model (a stage = v chunks: F = v, B = 2v),
        // whose bubble time is 3v(p-1): interleaving leaves 1/v of it.
        const double one_f_one_b_idle = equal_costs(one_f_one_b(p, m)).stats.idle[0] * v;
        EXPECT_NEAR(sim.stats.idle[0], one_f_one_b_idle / v, 1e-9);
      }
}

TEST(Simulate, ZbH1BubbleIsAThirdOfOneFOneB) {
  for (int p : kPs)
    for (int m : {p, 2 * p, 4 * p}) {
      Simulation zb = equal_costs(zb_h1(p, m)), base = equal_costs(one_f_one_b(p, m));
      // Qi et al.: bubble time (p-1)(F+I-W) = p-1 against 1F1B's (p-1)(F+I+W) = 3(p-1).
      EXPECT_DOUBLE_EQ(zb.stats.makespan, 3.0 * m + (p - 1)) << "p" << p << " m" << m;
      for (int r = 0; r < p; ++r) EXPECT_NEAR(zb.stats.idle[r], base.stats.idle[r] / 3, 1e-9) << "rank " << r;
      EXPECT_NEAR(zb.stats.bubble_max, closed_form_bubble(ScheduleId::zb_h1, p, m, 1), 1e-12);
    }
}

TEST(Simulate, ZbVIdlesOnlyWhileTheVFills) {
  for (int p : kPs)
    for (int m = 2 * p - 1; m <= 4 * p; ++m) {
      // Chunk costs: half a stage each, so the model costs what zb-h1's does.
      Simulation v = simulate(zb_v(p, m), CostModel::uniform(2 * p, 0.5, 0.5, 0.5));
      Simulation h1 = equal_costs(zb_h1(p, m));
      EXPECT_DOUBLE_EQ(v.stats.busy[0], h1.stats.busy[0]);
      for (int r = 0; r < p; ++r) EXPECT_DOUBLE_EQ(v.stats.idle[r], (p - 1) * 0.5) << "p" << p << " m" << m;
      EXPECT_NEAR(v.stats.bubble_max, closed_form_bubble(ScheduleId::zb_v, p, m, 2), 1e-12);
      EXPECT_LT(v.stats.bubble_max, h1.stats.bubble_max) << "p" << p << " m" << m;
    }
  // DualPipeV run as this IR runs it (each F&B pair forward first) reaches the same bound.
  for (int p : kPs)
    for (int m = 2 * p; m <= 4 * p; ++m) {
      Simulation d = simulate(dualpipe_v(p, m), CostModel::uniform(2 * p, 0.5, 0.5, 0.5));
      EXPECT_NEAR(d.stats.bubble_max, closed_form_bubble(ScheduleId::dualpipe_v, p, m, 2), 1e-12)
          << "p" << p << " m" << m;
      EXPECT_DOUBLE_EQ(d.peak_activations[0], p + 0.5);  // one chunk more than zb-v
    }
  EXPECT_TRUE(std::isnan(closed_form_bubble(ScheduleId::zb_v, 4, 6, 2)));
  EXPECT_TRUE(std::isnan(closed_form_bubble(ScheduleId::zb_h1, 4, 3, 1)));
}

TEST(Simulate, PeakActivations) {
  for (int p : kPs) {
    const int m = 4 * p;
    std::vector<double> gp = peak_activations(gpipe(p, m)), f1b = peak_activations(one_f_one_b(p, m)),
                        zb = peak_activations(zb_h1(p, m)), zbv = peak_activations(zb_v(p, m));
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(gp[r], m) << "gpipe rank " << r;
      EXPECT_EQ(f1b[r], p - r) << "1f1b rank " << r;
      EXPECT_EQ(zb[r], p) << "zb-h1 rank " << r;  // W delayed up to 1F1B's peak on rank 0
      EXPECT_LE(zbv[r], p) << "zb-v rank " << r;  // the V keeps 1F1B's peak
    }
    // Few microbatches: nobody holds more than exists.
    EXPECT_EQ(peak_activations(one_f_one_b(p, 1))[0], 1);
  }
  // Interleaved: rank 0 warms up (p - 1) * 2 + (v - 1) * p chunks, plus one, each 1/v.
  EXPECT_DOUBLE_EQ(peak_activations(interleaved_1f1b(4, 16, 2))[0], (3 * 2 + 4 + 1) / 2.0);
}

TEST(Simulate, LatencyAddsTwoHopsPerRankToGpipe) {
  for (int p : kPs) {
    const int m = 2 * p;
    const double latency = 0.25;
    Simulation sim = equal_costs(gpipe(p, m), latency);
    EXPECT_DOUBLE_EQ(sim.stats.makespan, 3.0 * (m + p - 1) + 2 * (p - 1) * latency);
  }
  // Local hand-offs (the turn of the V) pay no latency: ZB-V on one rank has no messages.
  Simulation one = simulate(zb_v(1, 4), CostModel::uniform(2, 1, 1, 1, 100.0));
  EXPECT_DOUBLE_EQ(one.stats.makespan, 2 * 4 * 3.0);
}

TEST(Simulate, PerStageCostsAndMeasuredCostsRoundTrip) {
  // A slow stage sets the pace of the steady state.
  CostModel costs = CostModel::uniform(4, 1, 1, 1);
  costs.f[2] = 2, costs.i[2] = 2, costs.w[2] = 2, costs.b[2] = 4;
  Schedule s = zb_h1(4, 8);
  Simulation sim = simulate(s, costs);
  EXPECT_GE(sim.stats.makespan, 8 * 6.0);
  EXPECT_DOUBLE_EQ(sim.stats.busy[2], 8 * 6.0);
  // Costs read back from the timeline reproduce it.
  CostModel back = measured_costs(s, sim.timeline);
  EXPECT_EQ(back.f, costs.f);
  EXPECT_EQ(back.i, costs.i);
  EXPECT_EQ(back.w, costs.w);
  EXPECT_EQ(back.b, costs.b);  // derived as i + w: the schedule has no B
  EXPECT_DOUBLE_EQ(simulate(s, back).stats.makespan, sim.stats.makespan);
}

TEST(Simulate, ReplayUsesEachActionsOwnDuration) {
  Schedule s = one_f_one_b(2, 2);
  Simulation sim = equal_costs(s);
  // A measured run where rank 1 waited 5 extra units before 1F0 and 1B1 ran
  // 4 units long: the replay keeps the durations and drops the wait.
  Timeline measured = sim.timeline;
  for (TimedAction& a : measured.ranks[1]) a.start += 5, a.end += 5;
  measured.ranks[1][3].end += 3;  // 1B1: 2 -> 5 units
  Simulation again = replay(s, measured);
  EXPECT_DOUBLE_EQ(again.timeline.ranks[1][0].start, 1.0);
  EXPECT_DOUBLE_EQ(again.timeline.ranks[1][3].end - again.timeline.ranks[1][3].start, 5.0);
  EXPECT_DOUBLE_EQ(again.stats.makespan, sim.stats.makespan + 3);
  EXPECT_THROW(replay(one_f_one_b(2, 3), measured), RuntimeError);
}

TEST(Simulate, TimelineIsConsistentWithTheSchedule) {
  Schedule s = interleaved_1f1b(4, 8, 2);
  Simulation sim = equal_costs(s, 0.1);
  const ScheduleIndex index(s);
  for (int r = 0; r < s.ranks; ++r) {
    ASSERT_EQ(sim.timeline.ranks[r].size(), s.actions[r].size());
    for (size_t t = 0; t < s.actions[r].size(); ++t) {
      const TimedAction& a = sim.timeline.ranks[r][t];
      EXPECT_EQ(a.action, s.actions[r][t]);
      if (t > 0) {
        EXPECT_GE(a.start, sim.timeline.ranks[r][t - 1].end);
      }
      for (const auto& [dep, where] : index.dependencies(a.action))
        EXPECT_GE(a.start, sim.timeline.ranks[where.rank][where.step].end + (where.rank != r ? 0.1 : 0) - 1e-12);
    }
  }
  EXPECT_THROW(simulate(schedule_from_csv("0F0,0B0\n1B0,1F0\n"), CostModel::uniform(2, 1, 1, 1)), ScheduleError);
}

TEST(Simulate, TimelineJsonAndChromeTrace) {
  Simulation sim = equal_costs(one_f_one_b(2, 2));
  nlohmann::json t = timeline_json(sim.timeline);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1][0], nlohmann::json({1, "F", 0, 1.0, 2.0}));
  nlohmann::json trace = chrome_trace(sim.timeline, "1f1b");
  int complete = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
  EXPECT_EQ(complete, 8);
}

}  // namespace
}  // namespace sextant::pp
