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
  m.add("tokens_per_s", step_s > 0 ? tokens / step_s : 0, "tokens/s");
  m.add("flops_per_step", flops, "FLOP");
  m.add_json("flops_formula", model::step_flops_formula(s.model));
  const double per_rank = step_s > 0 ? flops / (step_s * ranks) / 1e12 : 0;
  m.add("tflops_per_rank", per_rank, "TFLOP/s");
  const auto [peak, source] = peak_per_rank(s.config.params, ranks, s.device);
  m.add("peak_tflops", peak, "TFLOP/s");
  m.add_json("peak_source", source);
  m.add("mfu", peak > 0 ? per_rank / peak : 0, "1");
  m.add("sgemm_tflops_per_rank", s.rates.sgemm_tflops_per_rank, "TFLOP/s");
  m.add("mfu_vs_sgemm", s.rates.sgemm_tflops_per_rank > 0 ? per_rank / s.rates.sgemm_tflops_per_rank : 0, "1");

  // Bubble of the last timed step, from every pipeline rank's recorded actions.
  const pp::Timeline timeline = s.trainer->executor().gather(s.history.back().actions);
  const pp::TimelineStats stats = pp::summarize(timeline);
  m.add("bubble_fraction", stats.bubble_mean, "1");
  m.add("bubble_fraction_max", stats.bubble_max, "1");
  const pp::Schedule& schedule = s.trainer->schedule();
  m.add("bubble_closed_form",
        pp::closed_form_bubble(schedule.name, schedule.ranks, schedule.microbatches, schedule.chunks_per_rank()), "1");
  m.add_json("time_split", time_split(s, t.iters));
  std::vector<double> losses = s.check_losses;
  if (losses.empty())
    for (const model::StepReport& r : s.history) losses.push_back(r.loss);
  m.add_json("losses", losses);
  m.add_json("schedule", schedule.name);
  return m;
}

}  // namespace sextant::step
