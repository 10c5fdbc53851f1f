// The sweep's planner side: each config as the planner sees it, the
// calibration it asks for, and the calibrated and roofline predictions.
#include <cblas.h>

#include <fstream>
#include <limits>
#include <thread>

#include "harness/error.h"
#include "harness/peaks.h"
#include "harness/strings.h"
#include "harness/topology.h"
#include "kernels/planner/flops.h"
#include "suites/step/sweep.h"

namespace sextant::step {

namespace {

// What the calibrated planner needs to know of a config beyond the model.
struct PlannerView {
  plan::ModelSpec model;
  plan::Config config;
  plan::TrainSpec train;
  plan::StepShape shape;
};
PlannerView planner_view(const model::GptConfig& m, const ParallelConfig& p, int ranks_per_node, int cores,
                         int blas_threads) {
  PlannerView v;
  v.model = plan::model_spec(m);
  v.config = plan::plan_config(m, p);
  v.train = plan::train_spec(m, p);
  v.shape.schedule = m.schedule;
  v.shape.cp_comm = m.cp_comm;
  v.shape.a2a_size = m.a2a_size;
  v.shape.regather = m.regather;
  v.shape.zero = m.distributed_optimizer;
  v.shape.ranks_per_node = ranks_per_node;
  v.shape.cores_per_node = std::max(1, cores);
  v.shape.threads_per_rank = std::max(1, blas_threads);
  return v;
}
PlannerView planner_view(const Entry& e, int ranks_per_node) {
  return planner_view(e.model, e.parallel, ranks_per_node, static_cast<int>(std::thread::hardware_concurrency()),
                      openblas_get_num_threads());
}

// The planner's step time and its split for a view under the measured
// contention (the machine's speed now over the calibration's in
// reference_ratio); NaN (null) where it rejects the config.
std::pair<double, nlohmann::json> predicted_step(PlannerView v, const plan::Calibration& calibration,
                                                 const Contention& contention, double reference_ratio, int ranks) {
  v.shape.compute_slowdown = contention.slowdown * reference_ratio;
  v.shape.sync_s = contention.sync_s;
  v.shape.sync_chunk_s = contention.sync_chunk_s;
  v.shape.sync_short_s = contention.sync_short_s;
  v.shape.sync_short_chunk_s = contention.sync_short_chunk_s;
  v.shape.sync_group_s = contention.sync_group_s;
  v.shape.sync_ranks = ranks;
  try {
    const plan::CalibratedStep step = plan::calibrated_step(v.model, v.config, v.train, v.shape, calibration);
    return {step.step, step};
  } catch (const UsageError&) {
    return {std::numeric_limits<double>::quiet_NaN(), nullptr};
  }
}

}  // namespace

plan::CostQueries cost_queries(const SweepState& s, int ranks_per_node) {
  plan::CostQueries queries;
  for (const Entry& e : s.entries) {
    const PlannerView v = planner_view(e, ranks_per_node);
    try {
      plan::collect_queries(v.model, v.config, v.train, v.shape, queries);
    } catch (const UsageError&) {
      // a config the planner does not model: predicted as null
    }
  }
  return queries;
}

// The calibration: measured here, on every rank at once, at the shapes the
// configs ask for; or read from --set calibration=FILE.
plan::Calibration calibration_for(SweepState& s, const plan::CostQueries& queries) {
  const std::string source = s.config.params.value("calibration", std::string("run"));
  if (source != "run") {
    std::ifstream in(source);
    return plan::calibration_from_results(nlohmann::json::parse(in));
  }
  return calibrate_here(*s.host, queries, s.entries.front().model, s.ranks_per_node);
}

// The reference kernel's time beside the steps over its time in the
// calibration (1 where either is missing).
double reference_ratio(const SweepState& s, const Contention& contention) {
  if (!s.calibration || s.calibration->reference_s <= 0 || contention.reference_s <= 0) return 1;
  return contention.reference_s / s.calibration->reference_s;
}

std::pair<double, nlohmann::json> calibrated_step(const SweepState& s, const Entry& e, const Contention& contention) {
  if (!s.calibration) return {std::numeric_limits<double>::quiet_NaN(), nullptr};
  return predicted_step(planner_view(e, s.ranks_per_node), *s.calibration, contention, reference_ratio(s, contention),
                        s.host->size());
}

// The roofline planner's step time for this config on "this machine": peak = the
// measured per-rank sgemm rate (gemm efficiency 1), links = the measured
// all-reduce bus bandwidth and latency. NaN where the planner rejects it,
// and on a device: those rates are the host's, not the GPU's.
double roofline_step(const SweepState& s, const Entry& e) {
  if (s.device != Device::host) return std::numeric_limits<double>::quiet_NaN();
  plan::ClusterSpec cl;
  cl.device = "host";
  cl.gpus = cl.gpus_per_node = s.config.ranks;
  cl.memory_gb = describe_host().memory_bytes / 1e9 / s.config.ranks;
  cl.peak_tflops = s.rates.sgemm_tflops_per_rank;
  cl.nvlink_GBps = cl.network_GBps = s.rates.allreduce_busbw_GBps > 0 ? s.rates.allreduce_busbw_GBps : 1e3;
  cl.latency_us = s.rates.allreduce_latency_us;
  cl.gemm_efficiency = 1.0;
  // The GPU terms of the time model do not apply: no waves, launches or
  // per-layer overhead, and no memory bandwidth measured here (the roofline
  // costs the FLOPs and the links alone).
  cl.sms = 0, cl.gemm_latency_us = 0, cl.layer_overhead_us = 0;
  cl.hbm_GBps = std::numeric_limits<double>::infinity();
  const plan::TrainSpec train = plan::train_spec(e.model, e.parallel);
  const plan::Config pc = plan::plan_config(e.model, e.parallel);
  try {
    const plan::ModelSpec spec = plan::model_spec(e.model);
    plan::validate(spec, cl, train, pc);
    return plan::estimate(spec, cl, train, pc).step;
  } catch (const UsageError&) {
    return std::numeric_limits<double>::quiet_NaN();
  }
}

namespace {

// A metric of a record: its value where it has one ({value, unit}), else itself.
const nlohmann::json& metric(const nlohmann::json& metrics, const char* name) {
  require(metrics.contains(name), cat("plan --replay: the step/sweep record lacks the metric ", name,
                                      " (runs before plan --replay existed did not record it)"));
  const nlohmann::json& m = metrics.at(name);
  return m.is_object() && m.contains("value") ? m.at("value") : m;
}

}  // namespace

std::vector<ReplayedConfig> replay_sweep(const nlohmann::json& params, int ranks, const nlohmann::json& metrics,
                                         int cores, int blas_threads) {
  plan::Calibration calibration;
  from_json(metric(metrics, "calibration"), calibration);
  Contention contention;
  if (ranks > 1) {
    contention.slowdown = metric(metrics, "compute_slowdown").get<double>();
    contention.sync_s = metric(metrics, "sync_s").get<double>();
    contention.sync_short_s = metric(metrics, "sync_short_s").get<double>();
    contention.sync_chunk_s = metric(metrics, "sync_chunk_s").get<double>();
    contention.sync_short_chunk_s = metric(metrics, "sync_short_chunk_s").get<double>();
    for (const auto& [n, wait] : metric(metrics, "sync_by_group_size").items())
      contention.sync_group_s[std::stoi(n)] = wait.get<double>();
  } else if (metrics.contains("compute_slowdown")) {
    contention.slowdown = metric(metrics, "compute_slowdown").get<double>();
  }
  const double ratio =
      metrics.contains("reference_kernel_ratio") ? metric(metrics, "reference_kernel_ratio").get<double>() : 1;
  std::vector<ReplayedConfig> out;
  for (const nlohmann::json& row : metric(metrics, "ranking")) {
    ReplayedConfig r;
    r.config = row.at("config").get<std::string>();
    r.measured_s = row.at("step_s").get<double>();
    if (row.at("predicted_step_s").is_number()) r.recorded_s = row.at("predicted_step_s").get<double>();
    const Recipe recipe = recipe_for(parse_recipe(r.config, ranks), params);
    const PlannerView view = planner_view(recipe_model(recipe, params), recipe.parallel, ranks, cores, blas_threads);
    r.replayed_s = predicted_step(view, calibration, contention, ratio, ranks).first;
    out.push_back(r);
  }
  return out;
}

}  // namespace sextant::step
