// The step row of results/METRICS.md: throughput, Megatron model FLOPs,
// MFU, the executor's bubble, and the time of a step split into compute,
// exposed communication per dimension and bubble.
#include <algorithm>

#include "harness/strings.h"
#include "kernels/model/flops.h"
#include "kernels/pipeline/simulate.h"
#include "suites/step/step.h"

namespace sextant::step {

namespace {
// Every metric this file records, defined once (harness/metrics.h).
const MetricDef& kTokensPerS = define_metric({"step", "tokens_per_s", "tokens/s", Better::higher,
    "tokens of the global batch / step time", "train"});
const MetricDef& kFlopsPerStep = define_metric({"step", "flops_per_step", "FLOP", Better::neither,
    "model FLOPs of one step (flops_formula)", "train"});
const MetricDef& kFlopsFormula = define_metric({"step", "flops_formula", "json", Better::neither,
    "the FLOP count, Megatron's num_floating_point_operations, as text", "train"});
const MetricDef& kTflopsPerRank = define_metric({"step", "tflops_per_rank", "TFLOP/s", Better::higher,
    "model FLOPs per step / (step time x ranks)", "train"});
const MetricDef& kPeakTflops = define_metric({"step", "peak_tflops", "TFLOP/s", Better::neither,
    "the peak MFU divides by (device table, --peak-tflops, or the measured host rate)", "train"});
const MetricDef& kPeakSource = define_metric({"step", "peak_source", "json", Better::neither,
    "where peak_tflops comes from", "train"});
const MetricDef& kMfu = define_metric({"step", "mfu", "1", Better::higher,
    "model FLOPs utilisation: tflops_per_rank / peak_tflops", "train"});
const MetricDef& kSgemmTflopsPerRank = define_metric({"step", "sgemm_tflops_per_rank", "TFLOP/s", Better::higher,
    "measured f32 gemm rate per rank while every rank runs one", "train"});
const MetricDef& kMfuVsSgemm = define_metric({"step", "mfu_vs_sgemm", "1", Better::neither,
    "tflops_per_rank / sgemm_tflops_per_rank: MFU against what this machine's gemm reaches", "train"});
const MetricDef& kBubbleFraction = define_metric({"step", "bubble_fraction", "1", Better::lower,
    "pipeline idle fraction, mean over pipeline ranks (last timed step)", "train"});
const MetricDef& kBubbleFractionMax = define_metric({"step", "bubble_fraction_max", "1", Better::neither,
    "pipeline idle fraction of the most idle rank", "train"});
const MetricDef& kBubbleClosedForm = define_metric({"step", "bubble_closed_form", "1", Better::neither,
    "the schedule's closed-form bubble", "train"});
const MetricDef& kTimeSplit = define_metric({"step", "time_split", "json", Better::neither,
    "seconds per step in compute, exposed tp/cp/ep/dp/pp communication and bubble; fractions; definition", "train"});
const MetricDef& kLosses = define_metric({"step", "losses", "json", Better::neither,
    "loss per step (the conformance run's K steps, else the timed steps)", "train"});
const MetricDef& kSchedule = define_metric({"step", "schedule", "json", Better::neither,
    "the pipeline schedule that ran", "train"});
}  // namespace

namespace {

// This rank's step, in seconds: where it went. Communication is time inside
// the timed communicators' calls (blocking on the host: all exposed). The
// bubble is the executor's idle time between actions less the pipeline's
// own communication there (the sends), i.e. waiting for a neighbour.
std::map<std::string, double> split_of(const model::StepReport& r) {
  double busy = 0;
  for (const pp::TimedAction& a : r.actions) busy += a.end - a.start;
  std::map<std::string, double> out = r.comm_s;
  const double idle = std::max(0.0, r.pipeline_s - busy);
  out["bubble"] = std::max(0.0, idle - out["pp"]);
  double comm = 0;
  for (const char* d : {"tp", "cp", "ep", "dp", "pp"}) comm += out[d];
  out["compute"] = std::max(0.0, r.seconds - comm - out["bubble"]);
  return out;
}

// The mean over the timed steps of this rank (the last `iters`, after the
// warm-up), then over the ranks.
nlohmann::json time_split(State& s, int iters) {
  const size_t n = std::min(s.history.size(), static_cast<size_t>(std::max(iters, 1)));
  std::map<std::string, double> mean;
  for (size_t i = s.history.size() - n; i < s.history.size(); ++i)
    for (const auto& [key, value] : split_of(s.history[i])) mean[key] += value / n;
  nlohmann::json out = nlohmann::json::object();
  double step = 0;  // the parts add up to the step
  for (auto& [key, value] : mean) {
    const double over_ranks = s.host->all_reduce_value(value, ReduceOp::sum) / s.host->size();
    out[key] = over_ranks;
    step += over_ranks;
  }
  nlohmann::json fractions = nlohmann::json::object();
  for (auto it = out.begin(); it != out.end(); ++it)
    if (step > 0) fractions[it.key()] = it.value().get<double>() / step;
  out["fractions"] = fractions;
  out["definition"] =
      "seconds per step, mean over timed steps and ranks: tp/cp/ep/dp/pp = inside that dimension's communicator "
      "calls (host MPI blocks: all exposed; p2p counts posting and waits), bubble = pipeline idle between actions "
      "less pp sends, compute = the rest (kernels, optimizer)";
  return out;
}

}  // namespace

Metrics train_metrics(State& s, const RegionTimes& times) {
  Metrics m;
  const TimeStats& t = times.at("step");
  const int ranks = s.config.ranks;
  const double tokens = static_cast<double>(s.model.tokens_per_step());
  const double flops = model::step_flops(s.model);
  const double step_s = t.median;
  m.add(kTokensPerS, step_s > 0 ? tokens / step_s : 0);
  m.add(kFlopsPerStep, flops);
  m.add_json(kFlopsFormula, model::step_flops_formula(s.model));
  const double per_rank = step_s > 0 ? flops / (step_s * ranks) / 1e12 : 0;
  m.add(kTflopsPerRank, per_rank);
  const auto [peak, source] = peak_per_rank(s.config.params, ranks, s.device);
  m.add(kPeakTflops, peak);
  m.add_json(kPeakSource, source);
  m.add(kMfu, peak > 0 ? per_rank / peak : 0);
  m.add(kSgemmTflopsPerRank, s.rates.sgemm_tflops_per_rank);
  m.add(kMfuVsSgemm, s.rates.sgemm_tflops_per_rank > 0 ? per_rank / s.rates.sgemm_tflops_per_rank : 0);

  // Bubble of the last timed step, from every pipeline rank's recorded actions.
  const pp::Timeline timeline = s.trainer->executor().gather(s.history.back().actions);
  const pp::TimelineStats stats = pp::summarize(timeline);
  m.add(kBubbleFraction, stats.bubble_mean);
  m.add(kBubbleFractionMax, stats.bubble_max);
  const pp::Schedule& schedule = s.trainer->schedule();
  m.add(kBubbleClosedForm,
        pp::closed_form_bubble(schedule.name, schedule.ranks, schedule.microbatches, schedule.chunks_per_rank()));
  m.add_json(kTimeSplit, time_split(s, t.iters));
  std::vector<double> losses = s.check_losses;
  if (losses.empty())
    for (const model::StepReport& r : s.history) losses.push_back(r.loss);
  m.add_json(kLosses, losses);
  m.add_json(kSchedule, schedule.name);
  return m;
}

}  // namespace sextant::step
