#include "app/cli.h"

#include <charconv>
#include <cmath>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {

// Timed and warm-up iterations per case: far beyond any useful run, and
// well inside an int.
constexpr int64_t kMaxIterations = 1000000;

struct ProblemFlag {
  const char* flag;  // --seq
  const char* key;   // seq: the case option it sets
  const char* help;
};
const ProblemFlag kProblemFlags[] = {
    {"--seq", "seq", "Sequence length"},
    {"--batch", "batch", "Batch size"},
    {"--hidden", "hidden", "Hidden size"},
    {"--heads", "heads", "Attention heads"},
    {"--kv-heads", "kv_heads", "KV heads (GQA)"},
    {"--head-dim", "head_dim", "Head dimension"},
    {"--ffn", "ffn", "FFN hidden size"},
    {"--vocab", "vocab", "Vocabulary size"},
    {"--experts", "experts", "MoE experts"},
    {"--topk", "topk", "MoE experts per token"},
    {"--layers", "layers", "Transformer layers"},
    {"--microbatches", "microbatches", "Pipeline microbatches per step"},
    {"--min-bytes", "min_bytes", "collectives: smallest message, e.g. 1K"},
    {"--max-bytes", "max_bytes", "collectives: largest message, e.g. 64M"},
    {"--step-factor", "step_factor", "collectives: size multiplier between steps"},
    {"--group", "group", "collectives: run on every group of this dimension at once (tp, cp, dp, ...)"},
    {"--peak-tflops", "peak_tflops", "Peak TFLOP/s per device for MFU (default: device table)"},
};

// A parallel size flag: when given, at least 1 and at most 2^20.
void add_size(CLI::App& run, const char* name, std::optional<int64_t>& target, const char* help, const char* group) {
  run.add_option_function<int64_t>(
         name,
         [name, &target](const int64_t& v) {
           require(v >= 1 && v <= (int64_t{1} << 20), cat(name, " ", v, " must be between 1 and 1048576"));
           target = v;
         },
         help)
      ->group(group);
}

}  // namespace

void add_run_flags(CLI::App& run, RunFlags& f) {
  run.add_option("selection", f.selection, "Suites or suite/case to run (default: all). See 'sextant list'.");

  auto* where = "Where and how";
  run.add_option_function<std::string>(
         "--ranks", [&f](const std::string& v) { f.ranks = v; },
         "Rank counts to run at, e.g. 1,2,4,8 (default: powers of two up to -np)")
      ->group(where);
  run.add_option_function<std::string>(
         "--dtype", [&f](const std::string& v) { f.dtypes = v; }, "Data types, e.g. f32,bf16 (default: per case)")
      ->group(where);
  run.add_option("--device", f.device, "host (MPI ranks on CPU) or cuda (one GPU per rank)")->group(where);
  run.add_option("--profile", f.profile, "Size preset: default (small), ci (tiny), qualify (realistic)")->group(where);
  run.add_option_function<int64_t>(
         "--iters",
         [&f](const int64_t& v) {
           require(v >= 0, cat("--iters ", v, " must be at least 0 (0: check only)"));
           require(v <= kMaxIterations, cat("--iters ", v, " must be at most ", kMaxIterations));
           f.iters = v;
         },
         "Timed iterations per case (0: check only)")
      ->group(where);
  run.add_option_function<int64_t>(
         "--warmup",
         [&f](const int64_t& v) {
           require(v >= 0, cat("--warmup ", v, " must be at least 0"));
           require(v <= kMaxIterations, cat("--warmup ", v, " must be at most ", kMaxIterations));
           f.warmup = v;
         },
         "Untimed iterations before timing")
      ->group(where);
  run.add_flag("--per-iteration", f.per_iteration,
               "Record every timed iteration of every rank (times.<region>.per_iteration), as nccl-tests -I")
      ->group(where);
  run.add_option_function<std::string>(
         "--seed",
         [&f](const std::string& text) {
           // CLI11 would read -1 into an unsigned seed as 2^64 - 1: the text is parsed here.
           uint64_t v = 0;
           const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
           require(!text.empty() && text[0] != '-' && text[0] != '+' && error == std::errc() &&
                       end == text.data() + text.size(),
                   cat("--seed '", text, "' must be a whole number from 0 to 18446744073709551615"));
           f.seed = v;
         },
         "Seed of the deterministic inputs (0 to 2^64 - 1)")
      ->group(where);
  run.add_option("--timeout", f.timeout,
                 "End the whole run when one case takes longer (seconds; inf: no limit); see the footer")
      ->group(where);
  run.add_option_function<int64_t>(
         "--blas-threads",
         [&f](const int64_t& v) {
           require(v >= 1, cat("--blas-threads ", v, " must be at least 1"));
           f.blas_threads = v;
         },
         "OpenBLAS threads per rank (default: cores / ranks per node; capped at the cores)")
      ->group(where);

  auto* par = "Parallel config (pins one config; default: each case sweeps its own)";
  add_size(run, "--tp", f.tp, "Tensor-parallel size", par);
  add_size(run, "--cp", f.cp, "Context-parallel size", par);
  add_size(run, "--pp", f.pp, "Pipeline-parallel size", par);
  add_size(run, "--dp", f.dp, "Data-parallel size (default: world / (tp*cp*pp))", par);
  add_size(run, "--ep", f.ep, "Expert-parallel size (folded into tp*cp*dp)", par);
  add_size(run, "--etp", f.etp, "Expert tensor-parallel size (default: tp)", par);
  add_size(run, "--vpp", f.vpp, "Virtual pipeline chunks per rank", par);
  run.add_flag("--sp", f.sp, "Sequence parallelism (with tp)")->group(par);
  run.add_option_function<std::string>(
         "--order",
         [&f](const std::string& v) {
           f.order = v;
           f.order_given = true;
         },
         "Rank order, leftmost fastest (Megatron-Core; default tp-cp-ep-dp-pp, chosen per node layout on several "
         "nodes: TP inside a node, pipeline neighbours on adjacent nodes, DP outermost)")
      ->group(par);

  auto* prob = "Problem sizes (default: per case and profile; 'sextant list --options' shows each case's)";
  for (const ProblemFlag& p : kProblemFlags)
    run.add_option_function<std::string>(
           p.flag,
           [&f, p](const std::string& v) {
             f.problem.push_back({p.key, v, p.flag});
           },
           p.help)
        ->group(prob);
  run.add_option_function<std::vector<std::string>>(
         "--set",
         [&f](const std::vector<std::string>& items) {
           for (const std::string& item : items) {
             const size_t eq = item.find('=');
             require(eq != std::string::npos && eq > 0, cat("--set '", item, "' must look like key=value"));
             const std::string key = item.substr(0, eq);
             f.problem.push_back({key, item.substr(eq + 1), "--set " + key});
           }
         },
         "Any case option as key=value (repeatable), e.g. --set causal=true")
      ->group(prob);

  auto* out = "Output";
  run.add_option("-o,--out", f.out,
                 "Folder for the results JSON and its journal (a new file per run, never overwritten)")
      ->group(out);
  run.add_flag("--no-results", f.no_results, "Do not write a results file (nor traces)")->group(out);
  run.add_option("--traces", f.traces, "Folder for side files such as pipeline Chrome traces (default: OUT/traces)")
      ->group(out);
  run.add_option("--junit", f.junit,
                 "Also write JUnit XML (one test case per sextant case): in a folder (one that exists, or a path "
                 "ending in /) as sextant-<run id>.xml; or as this file name, with -<run id> added when the name "
                 "is taken. Never over another file")
      ->group(out);
  run.add_option("--dump", f.dump, "Write inputs, outputs and references of checked cases as .npy here")->group(out);
  run.add_flag("--no-check", f.no_check, "Skip conformance checks (benchmark only)")->group(out);
  run.add_flag("-q,--quiet", f.quiet, "Print only the summary")->group(out);
  run.add_option("--fault", f.fault, "Plant a named fault to prove the checks catch it (see 'sextant list')")
      ->group(out);
  run.add_option_function<double>(
         "--fault-magnitude",
         [&f](const double& v) {
           require(std::isfinite(v) && v > 0, cat("--fault-magnitude ", v, " must be a finite number above 0"));
           f.fault_magnitude = v;
         },
         "The size of a --fault that has one, e.g. dkv_scale's relative scale error (default: the fault's own)")
      ->group(out);
}

namespace {

std::string text_of(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Whether the command line gave a problem option for `key`.
bool given(const RunFlags& f, const std::string& key) {
  for (const RawOption& r : f.problem)
    if (r.key == key) return true;
  return false;
}

}  // namespace

void apply_config(CLI::App& run, RunFlags& f, const std::vector<ConfigEntry>& entries) {
  std::vector<RawOption> from_file;
  for (const ConfigEntry& e : entries) {
    if (e.key == "set") {  // set = ["key=value", ...]
      const nlohmann::json items = e.value.is_array() ? e.value : nlohmann::json::array({e.value});
      for (const nlohmann::json& item : items) {
        const std::string text = text_of(item);
        const size_t eq = text.find('=');
        require(eq != std::string::npos && eq > 0, cat(e.source, ": '", text, "' must look like key=value"));
        if (!given(f, text.substr(0, eq))) from_file.push_back({text.substr(0, eq), text.substr(eq + 1), e.source});
      }
      continue;
    }
    std::string flag = e.key == "selection" ? e.key : "--" + e.key;
    for (char& c : flag) c = c == '_' ? '-' : c;
    CLI::Option* option = run.get_option_no_throw(flag);
    const bool problem_flag = option && std::any_of(std::begin(kProblemFlags), std::end(kProblemFlags),
                                                    [&](const ProblemFlag& p) { return flag == p.flag; });
    if (!option || problem_flag) {  // a case option: checked against the cases' declarations
      const std::string key = problem_flag ? std::string(run.get_option(flag)->get_name()).substr(2) : e.key;
      std::string option_key = key;
      for (char& c : option_key) c = c == '-' ? '_' : c;
      if (!given(f, option_key)) from_file.push_back({option_key, e.value, e.source});
      continue;
    }
    require(option->get_name() != "--config", cat(e.source, ": a config file cannot name another"));
    if (option->count() > 0) continue;  // the command line wins
    try {
      if (e.value.is_array())
        for (const nlohmann::json& item : e.value) option->add_result(text_of(item));
      else option->add_result(text_of(e.value));
      option->run_callback();
    } catch (const CLI::Error& err) {
      throw UsageError(cat(e.source, ": ", err.what()));
    }
  }
  // File options go first so that later command-line ones of other keys keep their order.
  f.problem.insert(f.problem.begin(), from_file.begin(), from_file.end());
}

namespace {

std::vector<int> parse_int_list(const std::string& text, const std::string& option) {
  std::vector<int> out;
  for (const std::string& item : split(text, ',')) {
    try {
      size_t used = 0;
      int value = std::stoi(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(value);
    } catch (const std::exception&) {
      throw UsageError(cat(option, " '", text, "' must be a comma-separated list of integers, e.g. 1,2,4"));
    }
  }
  require(!out.empty(), cat(option, " '", text, "' must be a comma-separated list of integers, e.g. 1,2,4"));
  return out;
}

}  // namespace

double timeout_seconds(const RunFlags& f) {
  if (find_named<bool>({{"inf", true}, {"infinity", true}, {"none", true}}, f.timeout)) return INFINITY;
  char* end = nullptr;
  const double t = std::strtod(f.timeout.c_str(), &end);
  require(!f.timeout.empty() && end == f.timeout.c_str() + f.timeout.size() && t > 0 && !std::isnan(t),
          cat("--timeout '", f.timeout, "' must be a positive number of seconds, or inf for none"));
  return t;
}

namespace {
// Timed iterations after warm-up per profile (--iters / --warmup override).
TimingPlan profile_timing(Profile p) {
  switch (p) {
    case Profile::ci: return {1, 3};
    case Profile::qualify: return {5, 20};
    case Profile::standard: break;
  }
  return {2, 10};
}
}  // namespace

RunOptions to_run_options(const RunFlags& f) {
  RunOptions o;
  o.selection = f.selection;
  if (f.ranks) o.rank_counts = parse_int_list(*f.ranks, "--ranks");
  if (f.dtypes) {
    require(!f.dtypes->empty(), "--dtype '' must name data types, e.g. f32 or f32,bf16");
    for (const std::string& d : split(*f.dtypes, ',')) o.dtypes.push_back(parse_dtype(d));
  }
  o.device = parse_device(f.device);
  o.profile = parse_profile(f.profile);
  const TimingPlan preset = profile_timing(o.profile);
  o.timing.iters = static_cast<int>(f.iters.value_or(preset.iters));
  o.timing.warmup = static_cast<int>(f.warmup.value_or(preset.warmup));
  o.timing.per_iteration = f.per_iteration;
  o.timeout_s = timeout_seconds(f);
  o.blas_threads = f.blas_threads;
  o.junit = f.junit;
  o.quiet = f.quiet;
  o.seed = f.seed;
  o.check = !f.no_check;
  o.fault = f.fault;
  o.fault_magnitude = f.fault_magnitude;
  require(!f.out.empty(), "--out '' must name a folder");
  o.dump_dir = f.dump;
  o.out_dir = f.no_results ? "" : f.out;
  o.trace_dir = f.no_results ? "" : f.traces.empty() ? f.out + "/traces" : f.traces;

  if (f.tp || f.cp || f.pp || f.dp || f.ep || f.etp || f.vpp || f.sp) {
    ParallelConfig p;
    p.tp = static_cast<int>(f.tp.value_or(1));
    p.cp = static_cast<int>(f.cp.value_or(1));
    p.pp = static_cast<int>(f.pp.value_or(1));
    p.dp = static_cast<int>(f.dp.value_or(0));  // 0: derived from the world size by the caller
    p.ep = static_cast<int>(f.ep.value_or(1));
    p.etp = static_cast<int>(f.etp.value_or(0));
    p.vpp = static_cast<int>(f.vpp.value_or(1));
    o.vpp_given = f.vpp.has_value();
    p.sp = f.sp;
    p.order = f.order;
    o.parallel = p;
  }
  o.order_given = f.order_given;
  o.raw_options = f.problem;
  return o;
}

void resolve_for_world(RunOptions& o, int world) {
  if (!o.parallel || o.parallel->dp != 0) return;
  ParallelConfig& p = *o.parallel;
  const int64_t model = int64_t{p.tp} * p.cp * p.pp;
  require(world % model == 0,
          cat("tp*cp*pp = ", p.tp, "*", p.cp, "*", p.pp, " = ", model, " must divide the world size ", world));
  p.dp = static_cast<int>(world / model);
}

}  // namespace sextant
