// Instances, bad-input rules, and the schedule an instance runs (generated,
// loaded from a user's CSV, or with a planted schedule fault).
#include <algorithm>
#include <fstream>
#include <sstream>

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/pipeline/validate.h"
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {

namespace {

struct Sizes {
  int64_t layers, hidden, ffn, batch, seq;
};
// layers = 8 splits evenly into every pp * v of the sweep (2, 4, 8). Sizes
// stay small enough that the float64 reference (plain loops, every layer of
// every microbatch) takes seconds, not minutes.
Sizes profile_sizes(Profile profile) {
  if (profile == Profile::ci) return {8, 16, 32, 1, 4};
  if (profile == Profile::qualify) return {8, 256, 1024, 1, 128};
  return {8, 64, 256, 1, 32};
}

constexpr const char* kCsv = "csv";  // the user's schedule file

std::vector<std::string> known_schedules() {
  std::vector<std::string> names = pp::schedule_names();
  names.push_back(kCsv);
  return names;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  require(in.good(), cat("--set schedule_file=", path, " is not a readable file"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether `kind` runs under the user's --set schedule / schedule_file.
bool selected(const SweepRequest& req, const ScheduleKind& kind) {
  const std::string chosen = req.get<std::string>("schedule", "");
  const bool has_file = req.options.contains("schedule_file");
  const auto names = known_schedules();
  require(chosen.empty() || std::count(names.begin(), names.end(), chosen),
          cat("--set schedule=", chosen, " is not one of ", join(names, ", ")));
  const bool csv = chosen == kCsv;
  require(!csv || has_file, "--set schedule=csv needs --set schedule_file=PATH (one row per pipeline rank)");
  require(!has_file || chosen.empty() || csv, cat("--set schedule_file needs --set schedule=csv, not ", chosen));
  if (!chosen.empty()) return chosen == kind.name;
  return kind.from_file() == has_file;
}

// tp x pp x dp at `ranks`: pp in {2, 4}, tp in {1, 2, 4} (SP on with TP), dp the
// rest. One rank runs each schedule as a pipeline of one (every stage there,
// hand-offs local): the executor and the stages without messages, e.g. on a
// single GPU.
std::vector<ParallelConfig> parallel_configs(int ranks) {
  if (ranks == 1) return {ParallelConfig{}};
  std::vector<ParallelConfig> out;
  for (int pipeline_ranks : {2, 4}) {
    if (ranks % pipeline_ranks != 0) continue;
    const int rest = ranks / pipeline_ranks;
    for (int tp : {1, 2, 4}) {
      if (rest % tp != 0) continue;
      ParallelConfig c;
      c.tp = tp;
      c.pp = pipeline_ranks;
      c.dp = rest / tp;
      c.sp = tp > 1;
      out.push_back(c);
    }
  }
  return out;
}

// A user's CSV: its rows are the pipeline ranks, its stages and microbatches
// those its actions name.
pp::Schedule parse_csv(const std::string& path, int microbatches = 0, int stages = 0) {
  return pp::schedule_from_csv(read_file(path), microbatches, stages);
}

nlohmann::json params_of(const std::string& schedule, const Sizes& s, int m) {
  return {{"schedule", schedule}, {"microbatches", m}, {"layers", s.layers}, {"hidden", s.hidden},
          {"ffn", s.ffn},         {"batch", s.batch},  {"seq", s.seq}};
}

std::vector<CaseConfig> csv_configs(const SweepRequest& req, const Sizes& sizes) {
  const std::string path = req.get<std::string>("schedule_file", "");
  const pp::Schedule s = parse_csv(path, static_cast<int>(req.get<int64_t>("microbatches", 0)));
  ParallelConfig pc;
  if (req.parallel) {
    pc = *req.parallel;
  } else {
    if (req.ranks % s.ranks != 0) return {};  // another rank count runs it
    pc.pp = s.ranks;
    pc.dp = req.ranks / s.ranks;
  }
  pc.vpp = s.stages % s.ranks == 0 ? s.stages / s.ranks : 1;
  std::vector<CaseConfig> out;
  for (DType dtype : req.dtypes_or({DType::f32})) {
    CaseConfig c;
    c.params = params_of(kCsv, sizes, s.microbatches);
    c.params["schedule_file"] = path;
    c.params["stages"] = s.stages;
    c.parallel = pc;
    c.ranks = req.ranks;
    c.dtype = dtype;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::vector<OptionSpec> pipeline_options() {
  return {OptionSpec::choice("schedule", known_schedules(), "run only this schedule"),
          OptionSpec::text("schedule_file", "csv: a schedule file, one row of actions per pipeline rank"),
          OptionSpec::integer("microbatches", 1, 1 << 20, "microbatches per pipeline and step"),
          OptionSpec::size("layers", "MLP blocks in the whole model"),
          OptionSpec::size("hidden", "hidden size"),
          OptionSpec::size("ffn", "FFN hidden size"),
          OptionSpec::size("batch", "sequences per microbatch"),
          OptionSpec::size("seq", "sequence length")};
}

// Per rank: its layers' weights, gradients (f32) and the activations of
// every microbatch in flight (at most all m); rank 0 adds the float64
// reference of the whole model over the global batch.
MemoryEstimate pipeline_memory(const CaseConfig& c) {
  const Problem p = problem_of(c);
  const double act = static_cast<double>(p.batch) * p.seq * std::max(p.hidden, p.ffn);
  const double weights = 2.0 * p.hidden * p.ffn * p.layers;
  const double shard = 4.0 * (3 * weights / (p.pp * p.tp) + 4 * act * p.microbatches * p.layers / p.pp);
  const double reference = 8.0 * (3 * weights + 4 * act * p.total_microbatches() * p.layers);
  return {c.device == Device::host ? shard + reference : reference, c.device == Device::host ? 0 : shard};
}

std::vector<CaseConfig> sweep(const SweepRequest& req, const ScheduleKind& kind) {
  if (!selected(req, kind)) return {};
  Sizes s = profile_sizes(req.profile);
  s.layers = req.get<int64_t>("layers", s.layers);
  s.hidden = req.get<int64_t>("hidden", s.hidden);
  s.ffn = req.get<int64_t>("ffn", s.ffn);
  s.batch = req.get<int64_t>("batch", s.batch);
  s.seq = req.get<int64_t>("seq", s.seq);
  if (kind.from_file()) return csv_configs(req, s);
  const bool user_m = req.options.contains("microbatches");
  const std::vector<ParallelConfig> configs = req.parallel ? std::vector{*req.parallel} : parallel_configs(req.ranks);
  std::vector<CaseConfig> out;
  for (DType dtype : req.dtypes_or({DType::f32}))
    for (ParallelConfig pc : configs) {
      // Without --vpp each schedule runs its own chunk counts.
      const std::vector<int> chunks = req.vpp_given ? std::vector{pc.vpp} : kind.generated->chunks;
      const int p = pc.pp;
      const std::vector<int> ms =
          user_m ? std::vector{static_cast<int>(req.get<int64_t>("microbatches", 0))} : std::vector{p, 2 * p, 4 * p};
      for (int v : chunks)
        for (int m : ms) {
          if (!user_m && m < kind.generated->min_microbatches_per_stage * p) continue;
          CaseConfig c;
          c.params = params_of(kind.name, s, m);
          c.parallel = pc;
          c.parallel.vpp = v;
          c.ranks = req.ranks;
          c.dtype = dtype;
          out.push_back(c);
        }
    }
  return out;
}

Problem problem_of(const CaseConfig& c) {
  Problem p;
  p.schedule = c.s("schedule");
  p.generated = pp::find_schedule(p.schedule);
  p.schedule_file = c.params.value("schedule_file", std::string());
  p.pp = c.parallel.pp;
  p.tp = c.parallel.tp;
  p.dp = c.parallel.dp;
  p.chunks = c.parallel.vpp;
  p.stages = p.generated ? p.pp * p.chunks : static_cast<int>(c.i("stages"));
  p.microbatches = static_cast<int>(c.i("microbatches"));
  p.layers = c.i("layers");
  p.hidden = c.i("hidden");
  p.ffn = c.i("ffn");
  p.batch = c.i("batch");
  p.seq = c.i("seq");
  p.sp = c.parallel.sp && p.tp > 1;
  return p;
}

namespace {

void validate_generated(const Problem& p, const pp::ScheduleInfo& kind) {
  const int v = p.chunks;
  if (kind.chunk_rule)
    require(v == kind.chunks.at(0),
            cat("--vpp ", v, " must be ", kind.chunks.at(0), " for schedule ", p.schedule, " (", kind.chunk_rule, ")"));
  if (kind.needs_full_pipeline)
    require(p.microbatches >= p.pp, cat("--microbatches ", p.microbatches, " must be at least --pp ", p.pp,
                                        " for schedule ", p.schedule, " (its steady state needs a full pipeline)"));
  require(p.layers % (p.pp * v) == 0, cat("--layers ", p.layers, " must be divisible by pp*v = ", p.pp, "*", v, " = ",
                                          p.pp * v, " (every stage holds the same number of layers)"));
  pp::validate_schedule_request(kind.id, p.pp, p.microbatches, v);  // interleaved m % p, dualpipe-v m >= 2p
}

// A user's schedule: parsed (unknown actions name rank and step), sized
// against the run, and validated (ScheduleError: the rule and the grid).
void validate_csv(const Problem& p) {
  const pp::Schedule s = parse_csv(p.schedule_file, p.microbatches, p.stages);
  require(s.ranks == p.pp,
          cat("--pp ", p.pp, " must equal the ", s.ranks, " rows (pipeline ranks) of schedule_file ", p.schedule_file));
  require(p.layers % s.stages == 0, cat("--layers ", p.layers, " must be divisible by the ", s.stages,
                                        " stages of schedule_file ", p.schedule_file));
  pp::validate(s);
}

}  // namespace

void validate_problem(const CaseConfig& c, const ScheduleKind& kind) {
  const Problem p = problem_of(c);
  require(c.parallel.cp == 1, cat("pipeline runs tp x pp x dp: --cp ", c.parallel.cp, " must be 1"));
  require(c.parallel.ep == 1, cat("pipeline runs tp x pp x dp: --ep ", c.parallel.ep, " must be 1"));
  for (const auto& [name, value] : {std::pair{"--layers", p.layers},
                                    {"--hidden", p.hidden},
                                    {"--ffn", p.ffn},
                                    {"--batch", p.batch},
                                    {"--seq", p.seq},
                                    {"--microbatches", p.microbatches}})
    require_positive(name, value);
  if (kind.from_file()) validate_csv(p);
  else validate_generated(p, *kind.generated);
  require_divides("--tp", p.tp, "--ffn", p.ffn);
  if (p.sp && p.seq % p.tp != 0)
    throw UsageError(cat("--tp ", p.tp, " must divide --seq ", p.seq, " under --sp (each rank holds seq/tp tokens)"));
  const int64_t tags = 2L * p.stages * p.microbatches;
  require(tags <= 32768, cat("2 * stages * --microbatches = ", tags, " must be at most 32768 (MPI message tags)"));
  const pp::Fault fault = pp::faults().parse(c.fault);
  require(pp::faults().shows(fault, {p.pp, p.microbatches}),
          cat("--fault ", c.fault, " needs ", fault == pp::Fault::none ? "" : pp::faults().row(fault).shows_when,
              ", not --pp ", p.pp, " --microbatches ", p.microbatches));
}

namespace {

using pp::Action;
using pp::ActionType;

bool is_backward(const Action& a) { return a.type == ActionType::B || a.type == ActionType::I; }

// Moves the first action of `list` that matches to position `to`.
template <class Match>
void move_first(std::vector<Action>& list, Match match, size_t to) {
  auto it = std::find_if(list.begin(), list.end(), match);
  if (it == list.end()) throw RuntimeError("planted schedule fault: the action to move is not in the schedule");
  const Action a = *it;
  list.erase(it);
  list.insert(list.begin() + static_cast<std::ptrdiff_t>(std::min(to, list.size())), a);
}

// The last pipeline rank loses its last backward (and the W of a split one).
void drop_a_backward(pp::Schedule& s) {
  std::vector<Action>& list = s.actions.back();
  auto it = std::find_if(list.rbegin(), list.rend(), is_backward);
  if (it == list.rend()) throw RuntimeError("planted fault missing_backward: the last rank runs no backward");
  const Action dropped = *it;
  list.erase(std::next(it).base());
  std::erase(list, Action{dropped.stage, ActionType::W, dropped.microbatch});
}

// Stage 0 waits for microbatch 0's gradient right after its forward, before
// sending microbatch 1's activation; stage 1 wants microbatch 1 first.
void plant_deadlock(pp::Schedule& s) {
  std::vector<Action>& first = s.actions[s.stage_rank[0]];
  auto f00 = std::find(first.begin(), first.end(), Action{0, ActionType::F, 0});
  const size_t after_f00 = static_cast<size_t>(f00 - first.begin()) + 1;
  move_first(
      first, [](const Action& a) { return a.stage == 0 && a.microbatch == 0 && is_backward(a); }, after_f00);
  std::vector<Action>& second = s.actions[s.stage_rank[1]];
  move_first(
      second,
      [](const Action& a) {
        return a == Action{1, ActionType::F, 1};
      },
      0);
}

}  // namespace

pp::Schedule build_schedule(const Problem& p, pp::Fault fault) {
  pp::Schedule s = p.generated ? pp::make_schedule(*p.generated, p.pp, p.microbatches, p.chunks)
                               : parse_csv(p.schedule_file, p.microbatches, p.stages);
  if (fault == pp::Fault::missing_backward) drop_a_backward(s);
  if (fault == pp::Fault::deadlock) plant_deadlock(s);
  return s;
}

}  // namespace sextant::pipeline
