// The step row of results/METRICS.md: throughput, Megatron model FLOPs,
// MFU, the executor's bubble, the time of a step split into compute,
// exposed communication per dimension and bubble, communication per
// dimension (with overlap: also the same steps without it) and the data.
#include <algorithm>
#include <cmath>

#include "harness/op_times.h"
#include "harness/strings.h"
#include "kernels/ops/op_names.h"
#include "kernels/pipeline/simulate.h"
#include "kernels/planner/flops.h"
#include "suites/step/step.h"

namespace sextant::step {

namespace {
// Every metric this file records, defined once (harness/metrics.h).
const MetricDef& kTokensPerS =
    define_metric({"step", "tokens_per_s", "tokens/s", Better::higher,
                   "positions of the global batch (padding rows included) / step time", "train"});
const MetricDef& kFlopsPerStep = define_metric(
    {"step", "flops_per_step", "FLOP", Better::neither, "model FLOPs of one step (flops_formula)", "train"});
const MetricDef& kFlopsFormula =
    define_metric({"step", "flops_formula", "json", Better::neither,
                   "the FLOP count, Megatron's num_floating_point_operations, as text", "train"});
const MetricDef& kTflopsPerRank = define_metric(
    {"step", "tflops_per_rank", "TFLOP/s", Better::higher, "model FLOPs per step / (step time x ranks)", "train"});
const MetricDef& kPeakTflops =
    define_metric({"step", "peak_tflops", "TFLOP/s", Better::neither,
                   "the peak MFU divides by (device table, --peak-tflops, or the measured host rate)", "train"});
const MetricDef& kPeakSource =
    define_metric({"step", "peak_source", "json", Better::neither, "where peak_tflops comes from", "train"});
const MetricDef& kMfu = define_metric(
    {"step", "mfu", "1", Better::higher, "model FLOPs utilisation: tflops_per_rank / peak_tflops", "train"});
const MetricDef& kFp8PeakTflops =
    define_metric({"step", "fp8_peak_tflops", "TFLOP/s", Better::neither,
                   "FP8 linears: the dense FP8 peak mfu_fp8 divides by (device table; on the host its f32 estimate, "
                   "FP8 being emulated in f32 there)",
                   "train"});
const MetricDef& kFp8PeakSource =
    define_metric({"step", "fp8_peak_source", "json", Better::neither, "where fp8_peak_tflops comes from", "train"});
const MetricDef& kMfuFp8 = define_metric({"step", "mfu_fp8", "1", Better::higher,
                                          "FP8 linears: tflops_per_rank / fp8_peak_tflops, beside mfu against the "
                                          "bf16 peak (torchtitan leaves MFU blank under FP8)",
                                          "train"});
const MetricDef& kSgemmTflopsPerRank =
    define_metric({"step", "sgemm_tflops_per_rank", "TFLOP/s", Better::higher,
                   "measured f32 gemm rate per rank while every rank runs one", "train"});
const MetricDef& kMfuVsSgemm =
    define_metric({"step", "mfu_vs_sgemm", "1", Better::neither,
                   "tflops_per_rank / sgemm_tflops_per_rank: MFU against what this machine's gemm reaches", "train"});
const MetricDef& kBubbleFraction =
    define_metric({"step", "bubble_fraction", "1", Better::lower,
                   "pipeline idle fraction, mean over pipeline ranks (last timed step)", "train"});
const MetricDef& kBubbleFractionMax = define_metric(
    {"step", "bubble_fraction_max", "1", Better::neither, "pipeline idle fraction of the most idle rank", "train"});
const MetricDef& kBubbleClosedForm =
    define_metric({"step", "bubble_closed_form", "1", Better::neither, "the schedule's closed-form bubble", "train"});
const MetricDef& kTimeSplit = define_metric(
    {"step", "time_split", "json", Better::neither,
     "seconds per step in compute, exposed tp/cp/ep/dp/pp communication and bubble; fractions; definition", "train"});
const MetricDef& kOpTimeSplit = define_metric(
    {"step", "op_time_split", "json", Better::neither,
     "one more step with every op timed (host: wall seconds; GPU: events on the compute stream), mean over ranks: "
     "seconds and fraction of that step per op, other_s = the rest (communication, bubble, copies); definition",
     "train"});
const MetricDef& kLosses =
    define_metric({"step", "losses", "json", Better::neither,
                   "loss per step (the conformance run's K steps, else the timed steps)", "train"});
const MetricDef& kSchedule =
    define_metric({"step", "schedule", "json", Better::neither, "the pipeline schedule that ran", "train"});
const MetricDef& kDataset = define_metric(
    {"step", "dataset", "json", Better::neither,
     "where the tokens came from: random, or a Megatron indexed dataset (paths, sha256, tokens, documents)", "train"});
const MetricDef& kCommByDim = define_metric(
    {"step", "comm_by_dim", "json", Better::neither,
     "per dimension and in all: communication, exposed and hidden seconds per step, exposed fraction", "train"});
const MetricDef& kCommExposedFraction =
    define_metric({"step", "comm_exposed_fraction", "1", Better::lower,
                   "exposed / total communication time of the step, all dimensions", "train"});
const MetricDef& kDpCommExposedFraction =
    define_metric({"step", "dp_comm_exposed_fraction", "1", Better::lower,
                   "exposed / total data-parallel communication time (gradient reduce, parameter gather)", "train"});
const MetricDef& kDpOverlap = define_metric(
    {"step", "dp_overlap", "json", Better::neither,
     "overlap_grad_reduce, overlap_param_gather, bucket_mb, buckets, buckets started during the backward", "train"});
const MetricDef& kCommByDimWithoutOverlap =
    define_metric({"step", "comm_by_dim_without_overlap", "json", Better::neither,
                   "comm_by_dim of the same trainer with overlap off, measured in the same run", "train"});
const MetricDef& kTimeSplitWithoutOverlap =
    define_metric({"step", "time_split_without_overlap", "json", Better::neither,
                   "time_split of the same trainer with overlap off, measured in the same run", "train"});
const MetricDef& kCommExposedFractionWithoutOverlap =
    define_metric({"step", "comm_exposed_fraction_without_overlap", "1", Better::neither,
                   "comm_exposed_fraction with overlap off, in the same run", "train"});
const MetricDef& kDpCommExposedFractionWithoutOverlap =
    define_metric({"step", "dp_comm_exposed_fraction_without_overlap", "1", Better::neither,
                   "dp_comm_exposed_fraction with overlap off, in the same run", "train"});
}  // namespace

namespace {

const char* const kDims[] = {"tp", "cp", "ep", "dp", "pp"};

// This rank's step, in seconds: where it went. Communication is the time
// the step waited on the timed communicators (exposed: inside blocking
// calls, and the start, tests and wait of nonblocking ones). The bubble is
// the executor's idle time between actions less the pipeline's own
// communication there (the sends), i.e. waiting for a neighbour.
std::map<std::string, double> split_of(const model::StepReport& r) {
  double busy = 0;
  for (const pp::TimedAction& a : r.actions) busy += a.end - a.start;
  std::map<std::string, double> out = r.exposed_s;
  const double idle = std::max(0.0, r.pipeline_s - busy);
  out["bubble"] = std::max(0.0, idle - out["pp"]);
  double comm = 0;
  for (const char* d : kDims) comm += out[d];
  out["compute"] = std::max(0.0, r.seconds - comm - out["bubble"]);
  return out;
}

// Per dimension: communication, exposed and hidden seconds.
std::map<std::string, double> comm_of(const model::StepReport& r) {
  std::map<std::string, double> out;
  for (const char* d : kDims) {
    const double comm = r.comm_s.count(d) ? r.comm_s.at(d) : 0, exposed = r.exposed_s.count(d) ? r.exposed_s.at(d) : 0;
    out[std::string(d) + ".comm_s"] = comm;
    out[std::string(d) + ".exposed_s"] = exposed;
  }
  return out;
}

// The mean of f over the last `iters` steps of this rank, then over the ranks.
std::map<std::string, double> mean_over(State& s, const std::vector<model::StepReport>& steps, int iters,
                                        std::map<std::string, double> (*f)(const model::StepReport&)) {
  const size_t n = std::min(steps.size(), static_cast<size_t>(std::max(iters, 1)));
  std::map<std::string, double> mean;
  for (size_t i = steps.size() - n; i < steps.size(); ++i)
    for (const auto& [key, value] : f(steps[i])) mean[key] += value / n;
  for (auto& [key, value] : mean) value = s.host->all_reduce_value(value, ReduceOp::sum) / s.host->size();
  return mean;
}

nlohmann::json time_split(State& s, const std::vector<model::StepReport>& steps, int iters) {
  nlohmann::json out = nlohmann::json::object();
  double step = 0;  // the parts add up to the step
  for (const auto& [key, value] : mean_over(s, steps, iters, split_of)) {
    out[key] = value;
    step += value;
  }
  nlohmann::json fractions = nlohmann::json::object();
  for (auto it = out.begin(); it != out.end(); ++it)
    if (step > 0) fractions[it.key()] = it.value().get<double>() / step;
  out["fractions"] = fractions;
  out["definition"] =
      "seconds per step, mean over timed steps and ranks: tp/cp/ep/dp/pp = exposed communication of that dimension "
      "(inside blocking calls; the start, tests and wait of nonblocking collectives; p2p posting and waits), "
      "bubble = pipeline idle between actions less pp sends, compute = the rest (kernels, optimizer)";
  return out;
}

// Per dimension: communication, exposed and hidden seconds per step and the
// exposed fraction; "all" sums the dimensions.
nlohmann::json comm_by_dim(State& s, const std::vector<model::StepReport>& steps, int iters) {
  const std::map<std::string, double> mean = mean_over(s, steps, iters, comm_of);
  nlohmann::json out = nlohmann::json::object();
  double comm_all = 0, exposed_all = 0;
  auto entry = [](double comm, double exposed) {
    return nlohmann::json{
        {"comm_s", comm},
        {"exposed_s", exposed},
        {"hidden_s", std::max(0.0, comm - exposed)},
        {"exposed_fraction", comm > 0 ? nlohmann::json(std::min(1.0, exposed / comm)) : nlohmann::json(nullptr)}};
  };
  for (const char* d : kDims) {
    const double comm = mean.at(std::string(d) + ".comm_s"), exposed = mean.at(std::string(d) + ".exposed_s");
    out[d] = entry(comm, exposed);
    comm_all += comm, exposed_all += exposed;
  }
  out["all"] = entry(comm_all, exposed_all);
  return out;
}

double exposed_fraction(const nlohmann::json& comm, const char* dim) {
  const nlohmann::json& f = comm.at(dim).at("exposed_fraction");
  return f.is_null() ? std::nan("") : f.get<double>();
}

// The same trainer with overlap off for as many steps (same buckets, the
// same collectives, waited for at once): what overlap hides, in the same run.
std::vector<model::StepReport> steps_without_overlap(State& s, int iters) {
  const dp::Overlap on = s.trainer->overlap();
  s.trainer->set_overlap({});
  std::vector<model::StepReport> out;
  for (int i = 0; i <= iters; ++i) out.push_back(s.trainer->step());  // the first: warm-up
  s.trainer->set_overlap(on);
  return out;
}

void add_comm_metrics(Metrics& m, State& s, int iters) {
  const nlohmann::json comm = comm_by_dim(s, s.history, iters);
  m.add_json(kCommByDim, comm);
  m.add(kCommExposedFraction, exposed_fraction(comm, "all"));
  m.add(kDpCommExposedFraction, exposed_fraction(comm, "dp"));
  const dp::Overlap overlap = s.trainer->overlap();
  m.add_json(kDpOverlap, {{"overlap_grad_reduce", overlap.grad_reduce},
                          {"overlap_param_gather", overlap.param_gather},
                          {"bucket_mb", s.model.bucket_mb},
                          {"buckets", s.trainer->bucket_count()},
                          {"buckets_started_in_backward", s.trainer->buckets_started_in_backward()}});
  if (!overlap.grad_reduce && !overlap.param_gather) return;
  const std::vector<model::StepReport> plain = steps_without_overlap(s, iters);
  const nlohmann::json without = comm_by_dim(s, plain, iters);
  m.add_json(kCommByDimWithoutOverlap, without);
  m.add_json(kTimeSplitWithoutOverlap, time_split(s, plain, iters));
  m.add(kCommExposedFractionWithoutOverlap, exposed_fraction(without, "all"));
  m.add(kDpCommExposedFractionWithoutOverlap, exposed_fraction(without, "dp"));
}

}  // namespace

nlohmann::json op_time_split(model::GptTrainer& trainer, Communicator& host) {
  std::map<std::string, double> by_op;
  double step_s = 0;
  {
    OpTimes times;
    step_s = trainer.step().seconds;
    by_op = times.seconds();
  }
  const double ranks = host.size();
  step_s = host.all_reduce_value(step_s, ReduceOp::sum) / ranks;
  nlohmann::json seconds = nlohmann::json::object(), fractions = nlohmann::json::object();
  double ops = 0;
  for (const char* op : ops::timed::kAll) {  // every rank the same names, in the same order
    const double t = host.all_reduce_value(by_op.count(op) ? by_op.at(op) : 0.0, ReduceOp::sum) / ranks;
    seconds[op] = t, fractions[op] = step_s > 0 ? t / step_s : 0;
    ops += t;
  }
  return {{"seconds", seconds},
          {"fractions", fractions},
          {"ops_s", ops},
          {"step_s", step_s},
          {"other_s", std::max(0.0, step_s - ops)},
          {"definition",
           "one step after the timed ones, each op's time (an op inside another counts as the outer one: the host "
           "attention's gemms are attention), mean over ranks; other_s = step_s - ops_s: communication, bubble, "
           "copies and the code between ops"}};
}

namespace {

// Where the tokens came from: the file, its hashes and its size.
nlohmann::json dataset_record(State& s) {
  const model::IndexedDataset* d = s.trainer->tokens().dataset();
  if (!d) return {{"source", "random tokens (counter RNG)"}};
  nlohmann::json out = {{"source", "megatron indexed dataset"},
                        {"prefix", d->prefix()},
                        {"idx", d->idx_path()},
                        {"bin", d->bin_path()},
                        {"tokens", d->tokens()},
                        {"documents", d->documents()},
                        {"sequences", d->sequences()},
                        {"dtype_code", d->dtype_code()},
                        {"max_token", d->max_token()}};
  if (s.host->rank() == 0) {  // the record is root's
    out["idx_sha256"] = model::file_sha256(d->idx_path());
    out["bin_sha256"] = model::file_sha256(d->bin_path());
  }
  return out;
}

}  // namespace

Metrics train_metrics(State& s, const RegionTimes& times) {
  Metrics m;
  const TimeStats& t = times.at("step");
  const int ranks = s.config.ranks;
  const double tokens = static_cast<double>(s.model.tokens_per_step());
  const double flops = plan::step_flops(s.model);
  const double step_s = t.median;
  m.add(kTokensPerS, step_s > 0 ? tokens / step_s : 0);
  m.add(kFlopsPerStep, flops);
  m.add_json(kFlopsFormula, plan::step_flops_formula(s.model));
  const double per_rank = step_s > 0 ? flops / (step_s * ranks) / 1e12 : 0;
  m.add(kTflopsPerRank, per_rank);
  const auto [peak, source] = peak_per_rank(s.config.params, ranks, s.device);
  m.add(kPeakTflops, peak);
  m.add_json(kPeakSource, source);
  m.add(kMfu, peak > 0 ? per_rank / peak : 0);
  if (s.model.fp8) {
    const auto [fp8_peak, fp8_source] = fp8_peak_per_rank(s.config.params, ranks, s.device);
    m.add(kFp8PeakTflops, fp8_peak);
    m.add_json(kFp8PeakSource, fp8_source);
    m.add(kMfuFp8, fp8_peak > 0 ? per_rank / fp8_peak : 0);
  }
  m.add(kSgemmTflopsPerRank, s.rates.sgemm_tflops_per_rank);
  m.add(kMfuVsSgemm, s.rates.sgemm_tflops_per_rank > 0 ? per_rank / s.rates.sgemm_tflops_per_rank : 0);

  // Bubble of the last timed step, from every pipeline rank's recorded actions.
  const pp::Timeline timeline = s.trainer->executor().gather(s.history.back().actions);
  const pp::TimelineStats stats = pp::summarize(timeline);
  m.add(kBubbleFraction, stats.bubble_mean);
  m.add(kBubbleFractionMax, stats.bubble_max);
  const pp::Schedule& schedule = s.trainer->schedule();
  m.add(kBubbleClosedForm,
        pp::closed_form_bubble(s.model.schedule, schedule.ranks, schedule.microbatches, schedule.chunks_per_rank()));
  m.add_json(kTimeSplit, time_split(s, s.history, t.iters));
  m.add_json(kOpTimeSplit, op_time_split(*s.trainer, *s.host));
  m.add_json(kDataset, dataset_record(s));
  std::vector<double> losses = s.check_losses;
  if (losses.empty())
    for (const model::StepReport& r : s.history) losses.push_back(r.loss);
  m.add_json(kLosses, losses);
  m.add_json(kSchedule, schedule.name);
  add_comm_metrics(m, s, t.iters);  // it may run more steps (without overlap)
  add_memory_metrics(m, s);
  return m;
}

}  // namespace sextant::step
