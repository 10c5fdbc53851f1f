#include "app/plan_reference.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "harness/strings.h"
#include "kernels/planner/planner.h"
#include "kernels/planner/step_cost.h"

namespace sextant {

namespace {

std::string percent(double x) {
  char buf[24];
  std::snprintf(buf, sizeof buf, std::abs(x) >= 1e-3 || x == 0 ? "%.1f%%" : "%.2g%%", 100 * x);
  return buf;
}

// Where the roofline estimate's step goes, as fractions of it.
std::string split_of(const plan::Estimate& e) {
  const double comm = e.tp_comm + e.cp_comm + e.ep_comm + e.dp_comm + e.pp_comm;
  return cat("compute ", percent(e.compute / e.step), ", bubble ", percent(e.bubble / e.step), ", exposed comm ",
             percent(comm / e.step), " (tp ", percent(e.tp_comm / e.step), ", cp ", percent(e.cp_comm / e.step),
             ", ep ", percent(e.ep_comm / e.step), ", dp ", percent(e.dp_comm / e.step), ", pp ",
             percent(e.pp_comm / e.step), ")");
}

// The largest loss the planner models, and its share of the step.
std::pair<std::string, double> largest_loss(const plan::Estimate& e) {
  const std::pair<std::string, double> losses[] = {{"the pipeline bubble", e.bubble},
                                                   {"exposed TP communication", e.tp_comm},
                                                   {"exposed CP communication", e.cp_comm},
                                                   {"exposed EP all-to-all", e.ep_comm},
                                                   {"exposed DP gradient reduction", e.dp_comm},
                                                   {"pipeline messages", e.pp_comm}};
  std::pair<std::string, double> out{"nothing", 0};
  for (const auto& l : losses)
    if (l.second > out.second) out = l;
  return {out.first, out.second / e.step};
}

// Why the planner and the report differ, from the estimate's own numbers.
std::string explain(const plan::ReferenceRun& r, const plan::Estimate& e, const plan::ClusterSpec& c) {
  const double gap = e.mfu - r.reported_mfu;
  const auto [loss, share] = largest_loss(e);
  const std::string modelled = cat("it runs every FLOP at ", c.gemm_efficiency,
                                   " of peak and loses only what it "
                                   "models: ",
                                   split_of(e));
  if (gap > 0.02)
    return cat("planner optimistic by ", percent(gap), " points: ", modelled,
               ". The run also loses to what the planner leaves out: ", r.reported_reason,
               ", memory-bound kernels (norms, softmax, optimizer) below the matmul rate, launch gaps, stragglers and "
               "data loading");
  if (gap < -0.02)
    return cat("planner pessimistic by ", percent(-gap), " points: its largest loss is ", loss, " (", percent(share),
               " of the step), which the run largely hides: it overlaps communication with compute (the planner "
               "counts it exposed, overlapping only CP with attention and DP with the last backward) and runs "
               "its matmuls above ",
               c.gemm_efficiency, " of peak; ", modelled);
  return cat("planner within 2 points: ", modelled, "; the report names ", r.reported_reason);
}

}  // namespace

void print_reference_table(const plan::Calibration* cal) {
  std::printf(
      "# Five 6D reference configurations against the planner: MFU = model FLOPs "
      "(Megatron's formula) / (step x GPUs x dense bf16 peak)\n");
  std::printf("# %-13s %-17s %-34s %8s %8s %10s %7s\n", "run", "cluster", "config", "reported", "planner",
              cal ? "calibrated" : "", "gap");
  for (const plan::ReferenceRun& r : plan::reference_runs()) {
    const plan::ModelSpec m = plan::model_preset(r.model);
    plan::ClusterSpec c = plan::cluster_preset(r.device, r.gpus);
    c.gpus_per_node = r.gpus_per_node;
    const plan::TrainSpec t{r.global_batch, 1};
    const plan::Estimate e = plan::estimate(m, c, t, r.config);
    std::string calibrated;
    if (cal) {
      plan::StepShape shape;
      shape.schedule = r.config.vpp > 1 ? pp::ScheduleId::interleaved : pp::ScheduleId::one_f_one_b;
      shape.zero = r.config.distributed_optimizer;
      shape.bytes_per_element = 2;  // bf16 activations
      calibrated = percent(plan::estimate_calibrated(m, c, t, r.config, shape, *cal).mfu);
    }
    std::printf("  %-13s %-17s %-34s %8s %8s %10s %+6.1f\n", r.label.c_str(), cat(r.gpus, " x ", r.device).c_str(),
                r.config.to_string().c_str(), percent(r.reported_mfu).c_str(), percent(e.mfu).c_str(),
                calibrated.c_str(), 100 * (e.mfu - r.reported_mfu));
    std::printf("      %s\n", explain(r, e, c).c_str());
  }
  if (cal)
    std::printf(
        "# calibrated: the same configs with the step time built from the measured rates of %s (they are "
        "that machine's, not the cluster's, unless the calibration ran there)\n",
        cal->source.c_str());
}

}  // namespace sextant
