// Metrics (results/METRICS.md, pipeline row): the measured timeline of the
// timed step least disturbed by other processes, its bubble beside the simulator's
// prediction fed with the measured per-action costs and beside the closed
// form, throughput, peak activations, and the Chrome trace file.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/pipeline/simulate.h"
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {

namespace {
// Every metric this file records, defined once (harness/metrics.h).
const MetricDef& kBubbleMeasuredMean =
    define_metric({"pipeline", "bubble_measured_mean", "1", Better::lower,
                   "idle fraction of the step, mean over the pipeline ranks (timed step with the median makespan)"});
const MetricDef& kBubbleMeasuredMax = define_metric({"pipeline", "bubble_measured_max", "1", Better::lower,
                                                     "idle fraction of the step on the most idle pipeline rank"});
const MetricDef& kBubbleSimulated = define_metric(
    {"pipeline", "bubble_simulated", "1", Better::neither,
     "the simulator's bubble fed with the step's mean cost per action type and stage and the p2p latency"});
const MetricDef& kBubbleClosedForm =
    define_metric({"pipeline", "bubble_closed_form", "1", Better::neither,
                   "the schedule's closed form, e.g. (p-1)/(m+p-1) for 1F1B; null where none applies"});
const MetricDef& kBubbleReplayed =
    define_metric({"pipeline", "bubble_replayed", "1", Better::neither,
                   "the simulator fed with every action's own duration: the bubble the dependencies force"});
const MetricDef& kMakespanS = define_metric(
    {"pipeline", "makespan_s", "s", Better::lower, "step time of the timed step with the median makespan"});
const MetricDef& kMicrobatchesPerS = define_metric({"pipeline", "microbatches_per_s", "microbatches/s", Better::higher,
                                                    "global microbatches per second (dp x m / median step time)"});
const MetricDef& kPeakActivations =
    define_metric({"pipeline", "peak_activations", "microbatches", Better::neither,
                   "most microbatches whose activations a rank held at once (max over ranks)"});
const MetricDef& kPeakActivationsPerRank =
    define_metric({"pipeline", "peak_activations_per_rank", "json", Better::neither,
                   "peak held microbatches, one per pipeline rank"});
const MetricDef& kBubblePerRank = define_metric(
    {"pipeline", "bubble_per_rank", "json", Better::neither, "idle fraction of the step, one per pipeline rank"});
const MetricDef& kP2pLatencyS =
    define_metric({"pipeline", "p2p_latency_s", "s", Better::lower,
                   "one boundary message between pipeline neighbours (the simulator's communication cost)"});
const MetricDef& kCpuPerWall =
    define_metric({"pipeline", "cpu_per_wall", "1", Better::neither,
                   "process CPU seconds / wall seconds inside actions (below 1 when ranks share cores)"});
const MetricDef& kTimedSteps =
    define_metric({"pipeline", "timed_steps", "steps", Better::neither, "steps timed for the measured bubble"});
const MetricDef& kActionCosts =
    define_metric({"pipeline", "action_costs", "json", Better::neither,
                   "{F, B, I, W}: mean seconds per action type and stage, fed to the simulator"});
const MetricDef& kTimeline =
    define_metric({"pipeline", "timeline", "json", Better::neither,
                   "per pipeline rank, its actions [stage, type, microbatch, start_s, end_s]"});
const MetricDef& kTraceFile =
    define_metric({"pipeline", "trace_file", "json", Better::neither,
                   "absolute path of the Chrome trace of the timeline (in --traces); absent without a trace folder"});
}  // namespace

namespace {

// Every pipeline rank's per-action CPU seconds of one step (collective over pp).
std::vector<std::vector<double>> gather_cpu(PipelineState& s, const std::vector<double>& mine) {
  const size_t steps = s.schedule.max_steps();
  std::vector<double> padded(steps, 0.0), all(steps * static_cast<size_t>(s.schedule.ranks));
  std::copy_n(mine.begin(), std::min(mine.size(), steps), padded.begin());
  s.pp_comm->all_gather(padded.data(), all.data(), steps, DType::f64);
  std::vector<std::vector<double>> out;
  for (int r = 0; r < s.schedule.ranks; ++r)
    out.emplace_back(all.begin() + r * steps, all.begin() + r * steps + s.schedule.actions[r].size());
  return out;
}

// Mean seconds of each action type per stage, as the simulator was fed.
nlohmann::json costs_json(const pp::CostModel& c) { return {{"F", c.f}, {"B", c.b}, {"I", c.i}, {"W", c.w}}; }

// Writes the trace into the trace folder (--traces), never over an existing
// file (link() fails rather than replace). Returns the path.
std::string write_trace(const std::string& dir, const std::string& id, const nlohmann::json& trace) {
  std::string name = id;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.') ch = '_';
  std::filesystem::create_directories(dir);
  const std::string base = cat(std::filesystem::absolute(dir).string(), "/trace-", getpid(), "-", name);
  const std::string tmp = base + ".json.tmp";
  {
    std::ofstream out(tmp);
    out << trace.dump() << "\n";
    if (!out) throw RuntimeError("cannot write " + tmp);
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string path = attempt == 0 ? base + ".json" : cat(base, "-", attempt, ".json");
    if (link(tmp.c_str(), path.c_str()) == 0) {
      unlink(tmp.c_str());
      return path;
    }
  }
  unlink(tmp.c_str());
  throw RuntimeError("could not find a free trace file name near " + base);
}

// Process CPU seconds per wall second inside the actions of one step, over
// every pipeline rank: ~1 when each rank had its core to itself (one BLAS
// thread), lower when other processes took turns on the cores.
double cpu_per_wall(const pp::Timeline& t, const std::vector<std::vector<double>>& cpu) {
  double wall = 0, busy_cpu = 0;
  for (size_t r = 0; r < t.ranks.size(); ++r)
    for (size_t k = 0; k < t.ranks[r].size(); ++k) {
      wall += t.ranks[r][k].end - t.ranks[r][k].start;
      busy_cpu += cpu[r][k];
    }
  return wall > 0 ? busy_cpu / wall : 0.0;
}

}  // namespace

Metrics pipeline_metrics(PipelineState& s, const RegionTimes& times) {
  const TimeStats& t = times.at("step");
  const size_t runs = s.steps.size(), timed = std::min<size_t>(static_cast<size_t>(t.iters), runs);
  if (timed == 0) throw RuntimeError("pipeline metrics: no timed step was recorded");
  // Every pipeline rank's actions of each timed step (collective over pp).
  std::vector<pp::Timeline> timelines;
  std::vector<double> share;
  for (size_t i = runs - timed; i < runs; ++i) {
    timelines.push_back(s.executor->gather(s.steps[i]));
    share.push_back(cpu_per_wall(timelines.back(), gather_cpu(s, s.steps_cpu[i])));
  }
  // The step least disturbed by other processes on a shared machine (on a
  // machine of its own every step has a share near 1 and any is typical).
  const size_t chosen = static_cast<size_t>(std::max_element(share.begin(), share.end()) - share.begin());
  const pp::Timeline& measured = timelines[chosen];

  const pp::TimelineStats stats = pp::summarize(measured);
  const pp::CostModel costs = pp::measured_costs(s.schedule, measured, s.p2p_latency);
  const pp::Simulation predicted = pp::simulate(s.schedule, costs);
  const pp::Simulation replayed = pp::replay(s.schedule, measured, s.p2p_latency);
  const std::vector<double> peaks = pp::peak_activations(s.schedule);
  const Problem& p = s.p;
  const double closed =
      p.generated ? pp::closed_form_bubble(*p.generated, p.pp, p.microbatches, p.chunks) : std::nan("");

  Metrics m;
  m.add(kBubbleMeasuredMean, stats.bubble_mean);
  m.add(kBubbleMeasuredMax, stats.bubble_max);
  m.add(kBubbleSimulated, predicted.stats.bubble_mean);
  m.add(kBubbleClosedForm, closed);
  m.add(kBubbleReplayed, replayed.stats.bubble_mean);
  m.add(kMakespanS, stats.makespan);
  m.add(kMicrobatchesPerS, t.median > 0 ? p.total_microbatches() / t.median : 0.0);
  m.add(kPeakActivations, *std::max_element(peaks.begin(), peaks.end()));
  m.add_json(kPeakActivationsPerRank, peaks);
  m.add_json(kBubblePerRank, stats.bubble);
  m.add(kP2pLatencyS, s.p2p_latency);
  m.add(kCpuPerWall, share[chosen]);
  m.add(kTimedSteps, static_cast<double>(timed));
  m.add_json(kActionCosts, costs_json(costs));
  m.add_json(kTimeline, pp::timeline_json(measured));
  if (!s.out_dir.empty() && s.host->rank() == 0)
    m.add_json(kTraceFile, write_trace(s.out_dir, s.id, pp::chrome_trace(measured, s.id)));
  return m;
}

}  // namespace sextant::pipeline
