// The sweep case: one model over every valid factorisation of the rank count
// (--set configs=all, the default) or a list (--set configs=tp2-sp-dp2,dp4),
// every config timed in turn inside each iteration, then ranked by
// throughput next to the planner's prediction (kernels/model/planner.h) fed
// with this machine's measured sgemm rate and all-reduce bandwidth.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "harness/error.h"
#include "harness/peaks.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/model/flops.h"
#include "suites/step/check.h"
#include "suites/step/step.h"

namespace sextant::step {

namespace {
// Every metric this file records, defined once (harness/metrics.h).
const MetricDef& kAllreduceBusbwGBps = define_metric({"step", "allreduce_busbw_GBps", "GB/s", Better::higher,
    "measured all-reduce bus bandwidth, fed to the planner", "sweep"});
const MetricDef& kRanking = define_metric({"step", "ranking", "json", Better::neither,
    "every config, best first: config, microbatches, step_s, tokens_per_s, mfu, predicted_step_s, prediction_error_pct", "sweep"});
const MetricDef& kBestConfig = define_metric({"step", "best_config", "json", Better::neither,
    "the config with the highest tokens_per_s", "sweep"});
const MetricDef& kTokensPerS = define_metric({"step", "tokens_per_s", "tokens/s", Better::higher,
    "tokens per second of the best config", "sweep"});
const MetricDef& kMfu = define_metric({"step", "mfu", "1", Better::higher,
    "MFU of the best config", "sweep"});
const MetricDef& kConfigs = define_metric({"step", "configs", "1", Better::neither,
    "configs measured", "sweep"});
const MetricDef& kPlannerAbsErrorMedianPct = define_metric({"step", "planner_abs_error_median_pct", "%", Better::neither,
    "median |predicted - measured| / measured step time over the configs", "sweep"});
const MetricDef& kSgemmTflopsPerRank = define_metric({"step", "sgemm_tflops_per_rank", "TFLOP/s", Better::higher,
    "measured f32 gemm rate per rank, fed to the planner", "sweep"});
const MetricDef& kPeakSource = define_metric({"step", "peak_source", "json", Better::neither,
    "where the peak behind mfu comes from", "sweep"});
}  // namespace

namespace {


struct Entry {
  std::string name;
  ParallelConfig parallel;
  model::GptConfig model;
  std::unique_ptr<GridComms> grid;
  std::unique_ptr<model::ModelComms> comms;
  std::unique_ptr<model::GptTrainer> trainer;
  std::vector<double> seconds;  // per iteration: the step's time, max over ranks
};

struct SweepState {
  CaseConfig config;
  uint64_t seed = 0;
  Communicator* host = nullptr;
  Communicator* self = nullptr;
  std::unique_ptr<Communicator> host_self;  // on a device: this rank alone over MPI, for the baseline
  Device device = Device::host;
  HostRates rates;
  std::vector<Entry> entries;
};

// The configs and each one's model (the recipe's microbatches unless the user set them).
std::vector<std::pair<Recipe, model::GptConfig>> entries_of(const CaseConfig& c) {
  const std::string configs = c.params.value("configs", std::string("all"));
  std::vector<Recipe> list;
  if (configs == "all") {
    list = factorisations(c.ranks, c.params);
  } else {
    for (const std::string& name : split(configs, ','))
      list.push_back(recipe_for(parse_recipe(name, c.ranks), c.params));
  }
  std::vector<std::pair<Recipe, model::GptConfig>> out;
  for (Recipe& r : list) {
    nlohmann::json params = c.params;
    for (auto it = r.options.begin(); it != r.options.end(); ++it)
      if (!params.contains(it.key())) params[it.key()] = it.value();
    model::GptConfig m = model::gpt_config_from_json(params);
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
  c.parallel = ParallelConfig{1, 1, 1, req.ranks};  // nominal: the case builds each config's grid itself
  c.ranks = req.ranks;
  c.dtype = DType::f32;
  for (DType d : req.dtypes_or({DType::f32})) c.dtype = d;
  return {c};
}

void validate_sweep(const CaseConfig& c) {
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
  for (auto& [recipe, model] : entries_of(ctx.config)) {
    Entry e;
    e.name = recipe_name(recipe.parallel);
    e.parallel = recipe.parallel;
    e.model = model;
    e.grid = std::make_unique<GridComms>(make_grid_comms(ctx.comm, recipe.parallel));
    e.comms =
        std::make_unique<model::ModelComms>(model::make_model_comms(*e.grid, ctx.comm, ctx.host_comm, ctx.self, model));
    e.trainer = std::make_unique<model::GptTrainer>(model, *e.comms, s.seed);
    s.entries.push_back(std::move(e));
  }
  s.rates = measure_host_rates(ctx.host_comm);
  return s;
}

void run_sweep(SweepState& s) {
  for (Entry& e : s.entries) {
    s.host->barrier();
    const double start = now_seconds();
    e.trainer->step();
    e.seconds.push_back(s.host->all_reduce_value(now_seconds() - start, ReduceOp::max));
  }
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

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The planner's step time for this config on "this machine": peak = the
// measured per-rank sgemm rate (gemm efficiency 1), links = the measured
// all-reduce bus bandwidth and latency. NaN where the planner rejects it,
// and on a device: those rates are the host's, not the GPU's.
double predicted_step(const SweepState& s, const Entry& e) {
  if (s.device != Device::host) return std::numeric_limits<double>::quiet_NaN();
  plan::ClusterSpec cl;
  cl.device = "host";
  cl.gpus = cl.gpus_per_node = s.config.ranks;
  cl.memory_gb = describe_host().memory_bytes / 1e9 / s.config.ranks;
  cl.peak_tflops = s.rates.sgemm_tflops_per_rank;
  cl.nvlink_GBps = cl.network_GBps = s.rates.allreduce_busbw_GBps > 0 ? s.rates.allreduce_busbw_GBps : 1e3;
  cl.latency_us = s.rates.allreduce_latency_us;
  cl.gemm_efficiency = 1.0;
  const ParallelConfig& p = e.parallel;
  const plan::TrainSpec train{e.model.batch, e.model.batch / (static_cast<int64_t>(p.dp) * e.model.microbatches)};
  plan::Config pc;
  pc.tp = p.tp, pc.cp = p.cp, pc.pp = p.pp, pc.dp = p.dp, pc.ep = p.ep, pc.etp = p.expert_tp(), pc.vpp = p.vpp;
  pc.sp = p.sp;
  pc.distributed_optimizer = e.model.distributed_optimizer;
  try {
    const plan::ModelSpec spec = model::model_spec(e.model);
    plan::validate(spec, cl, train, pc);
    return plan::estimate(spec, cl, train, pc).step;
  } catch (const UsageError&) {
    return std::numeric_limits<double>::quiet_NaN();
  }
}

Metrics sweep_metrics(SweepState& s, const RegionTimes& times) {
  const int iters = std::max(times.at("sweep").iters, 1);
  const int ranks = s.config.ranks;
  const auto [peak, source] = peak_per_rank(s.config.params, ranks, s.device);
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> errors;
  for (const Entry& e : s.entries) {
    const std::vector<double> timed(e.seconds.end() - std::min<size_t>(e.seconds.size(), iters), e.seconds.end());
    const double step = median(timed), flops = model::step_flops(e.model);
    const double predicted = predicted_step(s, e);
    const double error = std::isfinite(predicted) && step > 0 ? 100.0 * (predicted - step) / step : NAN;
    if (std::isfinite(error)) errors.push_back(std::abs(error));
    rows.push_back({{"config", e.name},
                    {"microbatches", e.model.microbatches},
                    {"step_s", step},
                    {"tokens_per_s", step > 0 ? e.model.tokens_per_step() / step : 0},
                    {"mfu", step > 0 && peak > 0 ? flops / (step * ranks * peak * 1e12) : 0},
                    {"predicted_step_s", std::isfinite(predicted) ? nlohmann::json(predicted) : nlohmann::json()},
                    {"prediction_error_pct", std::isfinite(error) ? nlohmann::json(error) : nlohmann::json()}});
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
  m.add(kPlannerAbsErrorMedianPct, median(errors));
  m.add(kSgemmTflopsPerRank, s.rates.sgemm_tflops_per_rank);
  m.add(kAllreduceBusbwGBps, s.rates.allreduce_busbw_GBps);
  m.add_json(kPeakSource, source);
  if (s.host->rank() == 0) {  // the table a user reads to pick a config
    std::cout << "step/sweep: " << ranks << " ranks, ranked by measured throughput (planner fed with sgemm "
              << s.rates.sgemm_tflops_per_rank * 1e3 << " GFLOP/s per rank, all-reduce " << s.rates.allreduce_busbw_GBps
              << " GB/s)\n";
    for (const nlohmann::json& r : rows) {
      char line[200];
      std::snprintf(line, sizeof line, "  %-28s m=%-2d %9.4f s  %10.0f tokens/s  planner %9.4f s (%+.0f%%)\n",
                    r["config"].get<std::string>().c_str(), r["microbatches"].get<int>(), r["step_s"].get<double>(),
                    r["tokens_per_s"].get<double>(),
                    r["predicted_step_s"].is_null() ? NAN : r["predicted_step_s"].get<double>(),
                    r["prediction_error_pct"].is_null() ? NAN : r["prediction_error_pct"].get<double>());
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
      .options = model_options({OptionSpec::text("configs", "all (default) or a list such as tp2-sp-dp2,dp4")}),
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
