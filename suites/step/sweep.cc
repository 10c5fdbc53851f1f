// The sweep case: one model over every valid factorisation of the rank count
// (--set configs=all, the default) or a list (--set configs=tp2-sp-dp2,dp4),
// every config timed in turn inside each iteration, then ranked by
// throughput next to two predictions: the calibrated planner
// (kernels/planner/step_cost.h) fed with this machine's component rates,
// measured by the sweep on the same ranks (calibrate.cc) or read from a
// stored results file (--set calibration=FILE), and the roofline planner
// (kernels/planner/planner.h) fed with one sgemm rate and all-reduce bandwidth.

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>

#include "harness/error.h"
#include "harness/peaks.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "harness/topology.h"
#include "kernels/planner/flops.h"
#include "suites/step/check.h"
#include "suites/step/step.h"
#include "suites/step/sweep.h"

namespace sextant::step {

namespace {
// Every metric this file records, defined once (harness/metrics.h).
const MetricDef& kAllreduceBusbwGBps =
    define_metric({"step", "allreduce_busbw_GBps", "GB/s", Better::higher,
                   "measured all-reduce bus bandwidth, fed to the planner", "sweep"});
const MetricDef& kRanking = define_metric(
    {"step", "ranking", "json", Better::neither,
     "every config, best first: config, microbatches, step_s, tokens_per_s, mfu, predicted_step_s (calibrated "
     "planner), prediction_error_pct, predicted (its split), measured (the step's phases, each the slowest rank's, "
     "median: pipeline_s forward and backward, reduce_s the data-parallel gradient reduction, optimizer_s; "
     "tp/cp/ep/pp_exposed_s the communication of the forward and backward the step waited on, each the slowest "
     "rank's, median; op_s the seconds of each op in one more step with its ops timed and op_step_s that step's "
     "time, means over ranks, as step/train's op_time_split), roofline_step_s, roofline_error_pct",
     "sweep"});
const MetricDef& kBestConfig = define_metric(
    {"step", "best_config", "json", Better::neither, "the config with the highest tokens_per_s", "sweep"});
const MetricDef& kTokensPerS = define_metric(
    {"step", "tokens_per_s", "tokens/s", Better::higher, "tokens per second of the best config", "sweep"});
const MetricDef& kMfu = define_metric({"step", "mfu", "1", Better::higher, "MFU of the best config", "sweep"});
const MetricDef& kConfigs = define_metric({"step", "configs", "1", Better::neither, "configs measured", "sweep"});
const MetricDef& kPlannerAbsErrorMedianPct =
    define_metric({"step", "planner_abs_error_median_pct", "%", Better::neither,
                   "calibrated planner: median |predicted - measured| / measured step time over the configs", "sweep"});
const MetricDef& kRooflineAbsErrorMedianPct =
    define_metric({"step", "roofline_abs_error_median_pct", "%", Better::neither,
                   "the roofline planner (one sgemm rate, all-reduce busbw): the same median error", "sweep"});
const MetricDef& kComputeSlowdown =
    define_metric({"step", "compute_slowdown", "1", Better::neither,
                   "contention probe: how much slower a sgemm ran between the configs than alone on a core (median); "
                   "the calibrated planner scales compute by it",
                   "sweep"});
const MetricDef& kReferenceRatio =
    define_metric({"step", "reference_kernel_ratio", "1", Better::neither,
                   "the reference sgemm's time beside the steps over its time in the calibration (median); the "
                   "calibrated planner scales compute by it",
                   "sweep"});
const MetricDef& kSyncS = define_metric(
    {"step", "sync_s", "s", Better::neither,
     "contention probe: how long ranks that were computing waited for each other at a collective (median), "
     "added per blocking collective by the calibrated planner",
     "sweep"});
const MetricDef& kSyncShortS =
    define_metric({"step", "sync_short_s", "s", Better::neither,
                   "contention probe: the same wait when the ranks computed for only one probe call between "
                   "collectives (median); the calibrated planner interpolates between the two by the compute "
                   "between a config's collectives",
                   "sweep"});
const MetricDef& kSyncChunkS =
    define_metric({"step", "sync_chunk_s", "s", Better::neither,
                   "contention probe: the uncontended compute between collectives behind sync_s", "sweep"});
const MetricDef& kSyncShortChunkS =
    define_metric({"step", "sync_short_chunk_s", "s", Better::neither,
                   "contention probe: the uncontended compute between collectives behind sync_short_s", "sweep"});
const MetricDef& kSyncByGroupSize =
    define_metric({"step", "sync_by_group_size", "json", Better::neither,
                   "contention probe: sync_s measured on groups of each size the configs use (consecutive ranks, "
                   "all groups at once), by size (median); the calibrated planner charges a collective of that "
                   "group size this wait",
                   "sweep"});
const MetricDef& kCalibration = define_metric(
    {"step", "calibration", "json", Better::neither,
     "the calibration behind predicted_step_s: gemm, attention, elementwise and MoE routing models, links, p2p "
     "latency, reference kernel, source",
     "sweep"});
const MetricDef& kSgemmTflopsPerRank = define_metric({"step", "sgemm_tflops_per_rank", "TFLOP/s", Better::higher,
                                                      "measured f32 gemm rate per rank, fed to the planner", "sweep"});
const MetricDef& kPeakSource =
    define_metric({"step", "peak_source", "json", Better::neither, "where the peak behind mfu comes from", "sweep"});
}  // namespace

namespace {

// The configs and each one's model (the recipe's microbatches unless the user set them).
std::vector<std::pair<Recipe, model::GptConfig>> entries_of(const CaseConfig& c) {
  const std::string configs = c.params.value("configs", std::string(kAllConfigs));
  std::vector<Recipe> list;
  if (configs == kAllConfigs) {
    list = factorisations(c.ranks, c.params);
  } else {
    for (const std::string& name : split(configs, ','))
      list.push_back(recipe_for(parse_recipe(name, c.ranks), c.params));
  }
  std::vector<std::pair<Recipe, model::GptConfig>> out;
  for (Recipe& r : list) {
    model::GptConfig m = recipe_model(r, c.params);
    m.dtype = c.dtype;
    model::validate(m, r.parallel);  // listed configs: the user's, checked strictly
    out.emplace_back(r, m);
  }
  require(!out.empty(),
          cat("step/sweep: no parallel config of ", c.ranks, " ranks fits the model (see step/train rules)"));
  return out;
}

std::vector<CaseConfig> sweep_configs(const SweepRequest& req) {
  // The sweep measures (step/train plants the faults) and picks the parallel
  // configs itself (--set configs=...), so a pinned --tp/--cp/... skips it.
  if (!req.fault.empty() || req.parallel) return {};
  CaseConfig c;
  c.params = default_params(req);
  for (const std::string& key : step_keys())
    if (req.options.contains(key)) c.params[key] = req.options.at(key);
  if (req.options.contains("peak_tflops")) c.params["peak_tflops"] = req.options.at("peak_tflops");
  c.params["configs"] = req.get<std::string>("configs", "all");
  if (req.has("calibration")) c.params["calibration"] = req.get<std::string>("calibration", "run");
  c.parallel = ParallelConfig{1, 1, 1, req.ranks};  // nominal: the case builds each config's grid itself
  c.ranks = req.ranks;
  c.dtype = DType::f32;
  for (DType d : req.dtypes_or({DType::f32})) c.dtype = d;
  return {c};
}

void validate_sweep(const CaseConfig& c) {
  const std::string calibration = c.params.value("calibration", std::string("run"));
  if (calibration != "run") {
    std::ifstream in(calibration);
    require(in.good(), cat("--set calibration=", calibration, " must be 'run' or a readable results file"));
    try {
      plan::calibration_from_results(nlohmann::json::parse(in));
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(cat("--set calibration=", calibration, " is not a results file: ", e.what()));
    }
  }
  const model::GptConfig gpt = model::gpt_config_from_json(c.params);
  validate_dtype(c.dtype, gpt);
  model::token_source(gpt, 0);  // the dataset, if any
  entries_of(c);
}

SweepState setup_sweep(CaseContext& ctx) {
  SweepState s;
  s.config = ctx.config;
  s.seed = ctx.seed;
  s.host = &ctx.host_comm;
  s.self = &ctx.self;
  s.device = ctx.device;
  if (ctx.self.device() != Device::host) s.host_self = ctx.host_comm.split(ctx.host_comm.rank(), 0);
  const NodeMap nodes = detect_nodes(ctx.host_comm);
  for (auto& [recipe, model] : entries_of(ctx.config)) {
    Entry e;
    e.name = recipe_name(recipe.parallel);
    e.parallel = recipe.parallel;
    e.parallel.order = node_aware_order(e.parallel, nodes);  // on several nodes: TP inside a node (topology.h)
    recipe.parallel = e.parallel;
    e.model = model;
    e.grid = std::make_unique<GridComms>(make_grid_comms(ctx.comm, recipe.parallel));
    e.comms =
        std::make_unique<model::ModelComms>(model::make_model_comms(*e.grid, ctx.comm, ctx.host_comm, ctx.self, model));
    e.trainer = std::make_unique<model::GptTrainer>(model, *e.comms, s.seed);
    s.entries.push_back(std::move(e));
  }
  s.rates = measure_host_rates(ctx.host_comm);
  if (s.device == Device::host) {
    const int here = ranks_per_node(nodes).at(static_cast<size_t>(nodes.at(static_cast<size_t>(ctx.host_comm.rank()))));
    s.ranks_per_node = here;
    const plan::CostQueries queries = cost_queries(s, here);
    s.calibration = calibration_for(s, queries);
    s.probe = std::make_unique<ContentionProbe>(ctx.host_comm, queries.group_sizes, here);
  }
  return s;
}

void run_sweep(SweepState& s) {
  for (Entry& e : s.entries) {
    // An untimed step of the same config first: a training run repeats one
    // config's step, so its weights and activations are in cache, not
    // evicted by the configs timed before it. Without it, the 1-8 rank
    // sweep measured dp-only forward and backward 1.2-1.6x the time the
    // same config took when run alone.
    e.trainer->step();
    s.host->barrier();
    if (s.probe) s.probe->start();
    const double start = now_seconds();
    const model::StepReport report = e.trainer->step();
    std::array<double, 4 + kExposedDims.size()> times{now_seconds() - start, report.pipeline_s, report.reduce_s,
                                                      report.optimizer_s};
    for (size_t d = 0; d < kExposedDims.size(); ++d)
      if (auto it = report.exposed_s.find(kExposedDims[d]); it != report.exposed_s.end()) times[4 + d] = it->second;
    if (s.probe) s.probe->stop();
    s.host->all_reduce(times.data(), times.data(), times.size(), DType::f64, ReduceOp::max);
    e.seconds.push_back(times[0]);
    e.pipeline_s.push_back(times[1]);
    e.reduce_s.push_back(times[2]);
    e.optimizer_s.push_back(times[3]);
    e.exposed_s.push_back({times[4], times[5], times[6], times[7]});
  }
  if (s.probe) s.contention.push_back(s.probe->measure(*s.host));
}

// Every config's first loss from the same weights and batch against the
// reference and the one-rank baseline.
void check_sweep(SweepState& s, Checker& checker) {
  Communicator& host_self = s.host_self ? *s.host_self : *s.self;
  const double base = checker.is_root() ? baseline_run(s.entries[0].model, *s.self, host_self, s.seed, 1)[0].loss : 0;
  const double ref = checker.is_root() ? reference_run(s.entries[0].model, s.seed, 1)[0].loss : 0;
  for (Entry& e : s.entries) {
    e.trainer->reset();
    model::StepReport report;
    e.trainer->forward_backward(report);
    e.trainer->reset();
    if (checker.is_root())
      checker.compare("loss." + e.name, OpClass::loss, Tensor::from_values({1}, {report.loss}, DType::f64),
                      Tensor::from_values({1}, {base}, DType::f64), Tensor::from_values({1}, {ref}, DType::f64));
  }
}

double median(std::vector<double> v) { return percentile_of(std::move(v), 0.5); }

Metrics sweep_metrics(SweepState& s, const RegionTimes& times) {
  const int iters = std::max(times.at("sweep").iters, 1);
  const int ranks = s.config.ranks;
  const auto [peak, source] = peak_per_rank(s.config.params, ranks, s.device);
  // What the contention probe saw over the timed iterations (medians).
  const size_t timed_probes = std::min<size_t>(s.contention.size(), iters);
  std::vector<double> slowdowns, syncs, short_syncs, references;
  for (size_t i = s.contention.size() - timed_probes; i < s.contention.size(); ++i) {
    slowdowns.push_back(s.contention[i].slowdown), syncs.push_back(s.contention[i].sync_s);
    short_syncs.push_back(s.contention[i].sync_short_s), references.push_back(s.contention[i].reference_s);
  }
  Contention contention;
  contention.slowdown = median(slowdowns), contention.sync_s = median(syncs);
  contention.sync_short_s = median(short_syncs), contention.reference_s = median(references);
  if (!s.contention.empty()) {
    contention.sync_chunk_s = s.contention.back().sync_chunk_s;
    contention.sync_short_chunk_s = s.contention.back().sync_short_chunk_s;
    for (const auto& [group_size, last_wait] : s.contention.back().sync_group_s) {
      std::vector<double> waits;
      for (size_t i = s.contention.size() - timed_probes; i < s.contention.size(); ++i)
        if (auto it = s.contention[i].sync_group_s.find(group_size); it != s.contention[i].sync_group_s.end())
          waits.push_back(it->second);
      contention.sync_group_s[group_size] = waits.empty() ? last_wait : median(waits);
    }
  }
  const double slowdown = contention.slowdown;
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> errors, roofline_errors;
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  // The median of the timed (last `iters`) iterations.
  auto timed_median = [&](const std::vector<double>& v) {
    return median(std::vector<double>(v.end() - std::min<size_t>(v.size(), iters), v.end()));
  };
  for (const Entry& e : s.entries) {
    const double step = timed_median(e.seconds), flops = plan::step_flops(e.model);
    nlohmann::json measured = {{"pipeline_s", timed_median(e.pipeline_s)},
                               {"reduce_s", timed_median(e.reduce_s)},
                               {"optimizer_s", timed_median(e.optimizer_s)}};
    for (size_t d = 0; d < kExposedDims.size(); ++d) {
      std::vector<double> dim;
      for (const auto& x : e.exposed_s) dim.push_back(x[d]);
      measured[std::string(kExposedDims[d]) + "_exposed_s"] = timed_median(dim);
    }
    const nlohmann::json ops = op_time_split(*e.trainer, *s.host);
    measured["op_s"] = ops["seconds"];
    measured["op_step_s"] = ops["step_s"];
    const auto [predicted, split] = calibrated_step(s, e, contention);
    const double roofline = roofline_step(s, e);
    const double error = std::isfinite(predicted) && step > 0 ? 100.0 * (predicted - step) / step : NAN;
    const double roofline_error = std::isfinite(roofline) && step > 0 ? 100.0 * (roofline - step) / step : NAN;
    if (std::isfinite(error)) errors.push_back(std::abs(error));
    if (std::isfinite(roofline_error)) roofline_errors.push_back(std::abs(roofline_error));
    rows.push_back({{"config", e.name},
                    {"microbatches", e.model.microbatches},
                    {"step_s", step},
                    {"tokens_per_s", step > 0 ? e.model.tokens_per_step() / step : 0},
                    {"mfu", step > 0 && peak > 0 ? flops / (step * ranks * peak * 1e12) : 0},
                    {"predicted_step_s", number(predicted)},
                    {"prediction_error_pct", number(error)},
                    {"predicted", split},
                    {"measured", measured},
                    {"roofline_step_s", number(roofline)},
                    {"roofline_error_pct", number(roofline_error)}});
  }
  std::sort(rows.begin(), rows.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["tokens_per_s"].get<double>() > b["tokens_per_s"].get<double>();
  });
  Metrics m;
  m.add_json(kRanking, rows);
  m.add_json(kBestConfig, rows.empty() ? "" : rows[0]["config"].get<std::string>());
  m.add(kTokensPerS, rows.empty() ? 0 : rows[0]["tokens_per_s"].get<double>());  // of the best
  m.add(kMfu, rows.empty() ? 0 : rows[0]["mfu"].get<double>());
  m.add(kConfigs, static_cast<double>(rows.size()));
  m.add(kPlannerAbsErrorMedianPct, errors.empty() ? NAN : median(errors));
  m.add(kRooflineAbsErrorMedianPct, roofline_errors.empty() ? NAN : median(roofline_errors));
  if (s.calibration) m.add_json(kCalibration, *s.calibration);
  if (s.probe) m.add(kComputeSlowdown, slowdown);
  if (s.probe) m.add(kSyncS, contention.sync_s);
  if (s.probe) m.add(kSyncShortS, contention.sync_short_s);
  if (s.probe) m.add(kSyncChunkS, contention.sync_chunk_s);
  if (s.probe) m.add(kSyncShortChunkS, contention.sync_short_chunk_s);
  if (s.probe) {
    nlohmann::json groups = nlohmann::json::object();
    for (const auto& [n, wait] : contention.sync_group_s) groups[std::to_string(n)] = wait;
    m.add_json(kSyncByGroupSize, groups);
  }
  if (s.probe) m.add(kReferenceRatio, reference_ratio(s, contention));
  m.add(kSgemmTflopsPerRank, s.rates.sgemm_tflops_per_rank);
  m.add(kAllreduceBusbwGBps, s.rates.allreduce_busbw_GBps);
  m.add_json(kPeakSource, source);
  if (s.host->rank() == 0) {  // the table a user reads to pick a config
    std::cout << "step/sweep: " << ranks << " ranks, ranked by measured throughput; calibrated planner ("
              << (s.calibration ? s.calibration->source : std::string("none on a device")) << ", compute slowdown "
              << slowdown << ", machine speed x" << 1 / reference_ratio(s, contention) << ", sync "
              << contention.sync_s * 1e6 << " us, " << contention.sync_short_s * 1e6
              << " us close together) median error " << (errors.empty() ? NAN : median(errors)) << "%, roofline (sgemm "
              << s.rates.sgemm_tflops_per_rank * 1e3 << " GFLOP/s per rank, all-reduce " << s.rates.allreduce_busbw_GBps
              << " GB/s) " << (roofline_errors.empty() ? NAN : median(roofline_errors)) << "%\n";
    auto get = [](const nlohmann::json& v) { return v.is_null() ? NAN : v.get<double>(); };
    for (const nlohmann::json& r : rows) {
      char line[240];
      std::snprintf(
          line, sizeof line,
          "  %-28s m=%-2d %9.4f s  %10.0f tokens/s  calibrated %9.4f s (%+.0f%%)  roofline %9.4f s (%+.0f%%)\n",
          r["config"].get<std::string>().c_str(), r["microbatches"].get<int>(), r["step_s"].get<double>(),
          r["tokens_per_s"].get<double>(), get(r["predicted_step_s"]), get(r["prediction_error_pct"]),
          get(r["roofline_step_s"]), get(r["roofline_error_pct"]));
      std::cout << line;
    }
    std::cout.flush();
  }
  return m;
}

}  // namespace

CaseDef sweep_case() {
  return make_case(CaseTable<SweepState>{
      .suite = "step",
      .name = "sweep",
      .summary = "one model over every factorisation of the ranks, ranked by measured throughput vs the planner",
      .options = model_options(
          {OptionSpec::text("configs", "all (default) or a list such as tp2-sp-dp2,dp4"),
           OptionSpec::text("calibration",
                            "the calibrated planner's rates: run (measured by the sweep, default) or a results file")}),
      .table_metrics = {"tokens_per_s", "configs"},
      .configs = sweep_configs,
      .validate = validate_sweep,
      .memory = step_memory,
      .setup = setup_sweep,
      .timed = {{"sweep", run_sweep}},
      .check = check_sweep,
      .metrics = sweep_metrics,
  });
}
SEXTANT_REGISTER_CASE(kSuiteOrder, 20, sweep_case);

}  // namespace sextant::step
