#include "kernels/planner/step_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/pipeline/simulate.h"
#include "kernels/planner/step_costing.h"

namespace sextant::plan {

void to_json(nlohmann::json& j, const CalibratedStep& s) {
  j = {{"gemm_s", s.gemm},
       {"attention_s", s.attention},
       {"elementwise_s", s.elementwise},
       {"optimizer_s", s.optimizer},
       {"tp_s", s.tp},
       {"cp_s", s.cp},
       {"ep_s", s.ep},
       {"dp_s", s.dp},
       {"pp_s", s.pp},
       {"sync_s", s.sync},
       {"bubble_s", s.bubble},
       {"step_s", s.step},
       {"core_share", s.core_share}};
}

using step_costing::Action3;
using step_costing::Costing;
using step_costing::Part;

namespace {

// Rounds of the pipeline's contention fixed point (it moves by < 1% after these).
constexpr int kContentionRounds = 4;

// The schedule the step runs: pp = 1 is a plain loop over the microbatches.
pp::Schedule step_schedule(const Config& c, const StepShape& shape, int microbatches) {
  if (c.pp == 1) return pp::make_schedule(pp::ScheduleId::gpipe, 1, microbatches, 1);
  return pp::make_schedule(shape.schedule, c.pp, microbatches, pp::chunks_per_rank(shape.schedule, c.vpp));
}

// What the synchronisations of an action cost: sync_s each after
// sync_chunk_s or more of compute between them, less after less (a partner
// that computed briefly since the last one was rarely descheduled meanwhile).
double sync_time(const Part& p, const StepShape& shape) {
  if (shape.sync_s <= 0 || p.syncs <= 0) return 0;
  if (shape.sync_chunk_s <= 0) return shape.sync_s * p.syncs;
  // Linear in the compute between two synchronisations, through the two
  // measured points (or through 0 without the short one), flat beyond the long one.
  // The compute is shared out over the weighted count (p.syncs weighs each
  // by its group size, sync_weight): shared out over the plain count, the
  // stored 8-rank runs came out 2-5 points further off.
  const double gap = p.compute() / p.syncs;
  const double x0 = shape.sync_short_chunk_s > 0 ? shape.sync_short_chunk_s : 0;
  const double y0 = shape.sync_short_chunk_s > 0 ? shape.sync_short_s : 0;
  const double t = std::clamp((gap - x0) / std::max(1e-12, shape.sync_chunk_s - x0), 0.0, 1.0);
  return p.syncs * std::max(0.0, y0 + (shape.sync_s - y0) * t);
}

// Simulator costs per stage with compute run `slowdown` times slower; full
// recompute runs each stage's forward again before its backward.
pp::CostModel stage_costs(const std::vector<Action3>& stages, double slowdown, double latency, bool recompute,
                          const StepShape& shape) {
  pp::CostModel costs;
  auto time = [&](const Part& p) { return p.compute() * slowdown + p.tp + p.cp + p.ep + sync_time(p, shape); };
  for (const Action3& a : stages) {
    costs.f.push_back(time(a.f));
    costs.i.push_back(time(a.i) + (recompute ? time(a.f) : 0));
    costs.w.push_back(time(a.w));
    costs.b.push_back(costs.i.back() + time(a.w));
  }
  costs.latency = latency;
  return costs;
}

}  // namespace

CalibratedStep calibrated_step(const ModelSpec& m, const Config& c, const TrainSpec& t, const StepShape& shape,
                               const Calibration& cal) {
  ClusterSpec cluster;
  cluster.gpus = static_cast<int64_t>(c.tp) * c.cp * c.pp * c.dp;
  cluster.gpus_per_node = shape.ranks_per_node > 0 ? shape.ranks_per_node : cluster.gpus;
  validate(m, cluster, t, c);
  require(c.recompute != Recompute::selective,
          "the calibrated step model costs recompute=none or full; selective recomputation (the attention core "
          "again) is costed by the roofline alone");
  const Costing costing(m, c, t, shape, cal);
  const int microbatches = static_cast<int>(t.global_batch / (static_cast<int64_t>(c.dp) * t.micro_batch));
  // The schedule decides the stages: pp x its chunks per rank (1 without a pipeline).
  const pp::Schedule schedule = step_schedule(c, shape, microbatches);
  const int stage_count = schedule.stages;
  std::vector<Action3> stages;
  for (int s = 0; s < stage_count; ++s) stages.push_back(costing.stage(s, stage_count));
  const double latency = c.pp > 1 ? costing.p2p_message() : 0;

  CalibratedStep out;
  const bool recompute = c.recompute == Recompute::full;
  const double full_share = costing.core_share();
  out.core_share = full_share;
  StepShape shared = shape;  // its waits scaled with the contention
  pp::Simulation sim = pp::simulate(schedule, stage_costs(stages, full_share, latency, recompute, shared));
  // Ranks idle in the pipeline's bubble give their cores up (MPI yields
  // while it waits), so on shared cores the busy ranks compute, and wait
  // for their partners, as if fewer ranks shared the cores: the contention
  // scales with the ranks' busy fraction, down to none (the measured
  // slowdown over the oversubscription). A fixed point, from the full
  // contention. Measured with 8 ranks on 2 cores: the same gemms took
  // 2.0-2.4 ms a rank in pipeline configs and 12.9 ms in dp8.
  if (c.pp > 1 && costing.oversubscription() > 1) {
    const double floor = full_share / costing.oversubscription();
    for (int round = 0; round < kContentionRounds; ++round) {
      double busy = 0;
      for (double b : sim.stats.busy) busy += b;
      const double fraction = busy / (static_cast<double>(sim.stats.busy.size()) * sim.stats.makespan);
      out.core_share = std::max(floor, full_share * fraction);
      const double scale = out.core_share / full_share;
      shared.sync_s = shape.sync_s * scale, shared.sync_short_s = shape.sync_short_s * scale;
      sim = pp::simulate(schedule, stage_costs(stages, out.core_share, latency, recompute, shared));
    }
  }

  // The split, on rank 0 of the pipeline (its stages), per step.
  Part rank0;
  for (int s = 0; s < stage_count; s += c.pp) {
    const Action3& a = stages[static_cast<size_t>(s)];
    rank0 += a.f, rank0 += a.i, rank0 += a.w;
    out.sync += (sync_time(a.f, shared) + sync_time(a.i, shared) + sync_time(a.w, shared)) * microbatches;
  }
  const double mbs = microbatches;
  out.gemm = rank0.gemm * mbs * out.core_share;
  out.attention = rank0.attention * mbs * out.core_share;
  out.elementwise = rank0.elementwise * mbs * out.core_share;
  out.tp = rank0.tp * mbs, out.cp = rank0.cp * mbs, out.ep = rank0.ep * mbs;
  out.pp = c.pp > 1 ? latency * 2 * mbs : 0;
  const double busiest = sim.stats.busy.empty() ? 0 : *std::max_element(sim.stats.busy.begin(), sim.stats.busy.end());
  out.bubble = std::max(0.0, sim.stats.makespan - busiest);
  const Costing::AfterBackward after = costing.data_parallel_and_optimizer(full_share);  // every rank busy again
  out.dp = after.reduction, out.optimizer = after.optimizer;
  out.step = sim.stats.makespan + out.dp + out.optimizer;
  return out;
}

void collect_queries(const ModelSpec& m, const Config& c, const TrainSpec& t, const StepShape& shape,
                     CostQueries& out) {
  const Calibration nothing;
  Costing costing(m, c, t, shape, nothing);
  costing.record_into(&out);
  const int microbatches = static_cast<int>(t.global_batch / (static_cast<int64_t>(c.dp) * t.micro_batch));
  const int stages = step_schedule(c, shape, microbatches).stages;
  for (int s = 0; s < stages; ++s) costing.stage(s, stages);
  costing.data_parallel_and_optimizer();
  if (c.pp > 1) out.group_sizes.insert(2);  // pipeline neighbours
}

Estimate estimate_calibrated(const ModelSpec& m, const ClusterSpec& cluster, const TrainSpec& t, const Config& c,
                             const StepShape& shape, const Calibration& cal) {
  Estimate e = estimate(m, cluster, t, c);  // memory, model FLOPs
  StepShape s = shape;
  if (s.ranks_per_node == 0) s.ranks_per_node = static_cast<int>(cluster.gpus_per_node);
  const CalibratedStep step = calibrated_step(m, c, t, s, cal);
  e.compute = step.gemm + step.attention + step.elementwise + step.optimizer;
  e.tp_comm = step.tp, e.cp_comm = step.cp, e.ep_comm = step.ep, e.dp_comm = step.dp, e.pp_comm = step.pp;
  e.bubble = step.bubble;
  e.step = step.step;
  e.mfu = e.model_flops / (e.step * cluster.gpus * cluster.peak_tflops * 1e12);
  e.tokens_per_s = static_cast<double>(t.global_batch) * m.seq / e.step;
  return e;
}

}  // namespace sextant::plan
