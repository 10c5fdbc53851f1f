#include "app/plan_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "harness/strings.h"
#include "kernels/planner/fit.h"
#include "kernels/planner/planner.h"
#include "kernels/planner/step_cost.h"

namespace sextant {

namespace {

std::string percent(double x) {
  char buf[24];
  std::snprintf(buf, sizeof buf, std::abs(x) >= 1e-3 || x == 0 ? "%.1f%%" : "%.2g%%", 100 * x);
  return buf;
}

// Where the estimate's step goes, as fractions of it.
std::string split_of(const plan::Estimate& e) {
  return cat("gemm ", percent(e.gemm / e.step), ", attention ", percent(e.attention / e.step), ", memory-bound ",
             percent(e.memory_bound / e.step), ", overhead ", percent(e.overhead / e.step), ", optimizer ",
             percent(e.optimizer_time / e.step), ", bubble ", percent(e.bubble / e.step), "; exposed tp ",
             percent(e.tp_comm / e.step), ", cp ", percent(e.cp_comm / e.step), ", ep ", percent(e.ep_comm / e.step),
             ", dp ", percent(e.dp_comm / e.step), ", pp ", percent(e.pp_comm / e.step));
}

std::string settings_of(const plan::PublishedRun& r) {
  return cat(r.train.settings(), r.model.squared_relu ? ", squared ReLU" : "");
}

}  // namespace

void print_reference_table(const plan::Calibration* cal) {
  const std::vector<plan::PublishedRun>& runs = plan::published_runs();
  const plan::FitReport fit = plan::fit_report(runs);
  std::printf(
      "# %zu published runs against the planner: MFU = model FLOPs (Megatron's formula) / (step x GPUs x dense "
      "bf16 peak)\n"
      "# planner: the time model with its two free parameters fitted on every measured row; held out: fitted on "
      "every measured row but that one; * the tutorial's round figures, not fitted on\n",
      runs.size());
  std::printf("# %-24s %-15s %-34s %5s %8s %8s %8s %6s %6s %10s\n", "run", "cluster", "config", "prec", "reported",
              "planner", "held out", "gap", "gap ho", cal ? "calibrated" : "");
  for (size_t i = 0; i < runs.size(); ++i) {
    const plan::PublishedRun& r = runs[i];
    const plan::ModelSpec& m = r.model;
    plan::ClusterSpec c = plan::run_cluster(r);
    c.gemm_efficiency = fit.all.gemm_efficiency, c.layer_overhead_us = fit.all.layer_overhead_us;
    const plan::TrainSpec& t = r.train;
    const plan::Estimate e = plan::estimate(m, c, t, r.config);
    std::string calibrated;
    if (cal) {
      plan::StepShape shape;
      shape.schedule = r.config.vpp > 1 ? pp::ScheduleId::interleaved : pp::ScheduleId::one_f_one_b;
      shape.zero = r.config.distributed_optimizer;
      shape.bytes_per_element = 2;  // bf16 activations
      calibrated = percent(plan::estimate_calibrated(m, c, t, r.config, shape, *cal).mfu);
    }
    std::printf("%s %-24s %-15s %-34s %5s %8s %8s %8s %+6.1f %+6.1f %10s\n", r.illustrative ? "*" : " ",
                r.label.c_str(), cat(r.gpus, " x ", r.device).c_str(), r.config.to_string().c_str(),
                r.train.precision == plan::Precision::fp8 ? "fp8" : "bf16", percent(r.reported_mfu).c_str(),
                percent(e.mfu).c_str(), percent(e.mfu - fit.gap[i] + fit.held_out_gap[i]).c_str(), 100 * fit.gap[i],
                100 * fit.held_out_gap[i], calibrated.c_str());
    std::printf("      %s, micro batch %ld, global batch %ld; %s\n      source: %s\n", settings_of(r).c_str(),
                static_cast<long>(r.train.micro_batch), static_cast<long>(r.train.global_batch), split_of(e).c_str(),
                r.source.c_str());
  }
  std::printf(
      "# fitted on the measured rows: gemm efficiency %.3f, layer overhead %.0f us (the planner's defaults: %.3f, "
      "%.0f us)\n"
      "# |gap| over the measured rows (the tutorial's round figures left out): median %.1f, max %.1f MFU points; "
      "held out: median %.1f, max %.1f\n",
      fit.all.gemm_efficiency, fit.all.layer_overhead_us, plan::ClusterSpec{}.gemm_efficiency,
      plan::ClusterSpec{}.layer_overhead_us, 100 * fit.median_gap, 100 * fit.max_gap, 100 * fit.median_held_out_gap,
      100 * fit.max_held_out_gap);
  if (cal)
    std::printf(
        "# calibrated: the same configs with the step time built from the measured rates of %s (they are "
        "that machine's, not the cluster's, unless the calibration ran there)\n",
        cal->source.c_str());
}

}  // namespace sextant
