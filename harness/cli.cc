#include "harness/cli.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

void add_run_flags(CLI::App& run, RunFlags& f) {
  run.add_option("selection", f.selection, "Suites or suite/case to run (default: all). See 'sextant list'.");

  auto* where = "Where and how";
  run.add_option("--ranks", f.ranks, "Rank counts to run at, e.g. 1,2,4,8 (default: powers of two up to -np)")
      ->group(where);
  run.add_option("--dtype", f.dtypes, "Data types, e.g. f32,bf16 (default: per case)")->group(where);
  run.add_option("--device", f.device, "host (MPI ranks on CPU) or cuda (one GPU per rank)")->group(where);
  run.add_option("--profile", f.profile, "Size preset: default (small), ci (tiny), qualify (realistic)")
      ->group(where);
  run.add_option("--iters", f.iters, "Timed iterations per case (0: check only)")->group(where);
  run.add_option("--warmup", f.warmup, "Untimed iterations before timing")->group(where);
  run.add_option("--seed", f.seed, "Seed of the deterministic inputs")->group(where);
  run.add_option("--timeout", f.timeout,
                 "End the whole run when one case takes longer (seconds; inf: no limit); see the footer")
      ->group(where);
  run.add_option("--blas-threads", f.blas_threads, "OpenBLAS threads per rank (default: cores / ranks per node)")
      ->group(where);
  run.add_option("--peak-tflops", f.peak_tflops, "Peak TFLOP/s per device for MFU (default: device table)")
      ->group(where);

  auto* par = "Parallel config (pins one config; default: each case sweeps its own)";
  run.add_option("--tp", f.tp, "Tensor-parallel size")->group(par);
  run.add_option("--cp", f.cp, "Context-parallel size")->group(par);
  run.add_option("--pp", f.pp, "Pipeline-parallel size")->group(par);
  run.add_option("--dp", f.dp, "Data-parallel size (default: world / (tp*cp*pp))")->group(par);
  run.add_option("--ep", f.ep, "Expert-parallel size (folded into tp*cp*dp)")->group(par);
  run.add_option("--etp", f.etp, "Expert tensor-parallel size (default: tp)")->group(par);
  run.add_option("--vpp", f.vpp, "Virtual pipeline chunks per rank")->group(par);
  run.add_flag("--sp", f.sp, "Sequence parallelism (with tp)")->group(par);
  run.add_option("--order", f.order, "Rank order, leftmost fastest (Megatron-Core)")->group(par);
  run.add_option("--group", f.group, "collectives: run on every group of this dimension at once (tp, cp, dp, ...)")
      ->group(par);

  auto* prob = "Problem sizes (default: per case and profile)";
  run.add_option("--seq", f.seq, "Sequence length")->group(prob);
  run.add_option("--batch", f.batch, "Batch size (micro-batch)")->group(prob);
  run.add_option("--hidden", f.hidden, "Hidden size")->group(prob);
  run.add_option("--heads", f.heads, "Attention heads")->group(prob);
  run.add_option("--kv-heads", f.kv_heads, "KV heads (GQA)")->group(prob);
  run.add_option("--head-dim", f.head_dim, "Head dimension")->group(prob);
  run.add_option("--ffn", f.ffn, "FFN hidden size")->group(prob);
  run.add_option("--vocab", f.vocab, "Vocabulary size")->group(prob);
  run.add_option("--experts", f.experts, "MoE experts")->group(prob);
  run.add_option("--topk", f.topk, "MoE experts per token")->group(prob);
  run.add_option("--layers", f.layers, "Transformer layers")->group(prob);
  run.add_option("--microbatches", f.microbatches, "Pipeline microbatches per step")->group(prob);
  run.add_option("--min-bytes", f.min_bytes, "collectives: smallest message, e.g. 1K")->group(prob);
  run.add_option("--max-bytes", f.max_bytes, "collectives: largest message, e.g. 64M")->group(prob);
  run.add_option("--step-factor", f.step_factor, "collectives: size multiplier between steps")->group(prob);
  run.add_option("--set", f.sets, "Any case option as key=value (repeatable), e.g. --set causal=true")->group(prob);

  auto* out = "Output";
  run.add_option("-o,--out", f.out,
                 "Folder for the results JSON and its journal (a new file per run, never overwritten)")
      ->group(out);
  run.add_flag("--no-results", f.no_results, "Do not write a results file")->group(out);
  run.add_option("--junit", f.junit,
                 "Also write JUnit XML (one test case per sextant case): in a folder (one that exists, or a path "
                 "ending in /) as sextant-<run id>.xml; or as this file name, with -<run id> added when the name "
                 "is taken. Never over another file")
      ->group(out);
  run.add_option("--dump", f.dump, "Write inputs, outputs and references of checked cases as .npy here")
      ->group(out);
  run.add_flag("--no-check", f.no_check, "Skip conformance checks (benchmark only)")->group(out);
  run.add_flag("-q,--quiet", f.quiet, "Print only the summary")->group(out);
  run.add_option("--fault", f.fault, "Plant a named fault to prove the checks catch it (see 'sextant list')")
      ->group(out);
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
  return out;
}

void set_option(nlohmann::json& options, const std::string& assignment) {
  size_t eq = assignment.find('=');
  require(eq != std::string::npos && eq > 0, cat("--set '", assignment, "' must look like key=value"));
  std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  // Numbers and booleans become JSON numbers and booleans; the rest strings.
  nlohmann::json parsed = nlohmann::json::parse(value, nullptr, false);
  options[key] = (parsed.is_discarded() || parsed.is_object() || parsed.is_array()) ? nlohmann::json(value) : parsed;
}

}  // namespace

RunOptions to_run_options(const RunFlags& f) {
  RunOptions o;
  o.selection = f.selection;
  if (!f.ranks.empty()) o.rank_counts = parse_int_list(f.ranks, "--ranks");
  for (const std::string& d : split(f.dtypes, ',')) o.dtypes.push_back(parse_dtype(d));
  o.device = parse_device(f.device);
  require(f.profile == "default" || f.profile == "ci" || f.profile == "qualify",
          cat("--profile '", f.profile, "' must be default, ci or qualify"));
  o.profile = f.profile;
  o.timing.iters = f.iters >= 0 ? f.iters : (f.profile == "ci" ? 3 : f.profile == "qualify" ? 20 : 10);
  o.timing.warmup = f.warmup >= 0 ? f.warmup : (f.profile == "ci" ? 1 : f.profile == "qualify" ? 5 : 2);
  require(f.timeout > 0, cat("--timeout ", f.timeout, " must be positive"));
  o.seed = f.seed;
  o.check = !f.no_check;
  o.fault = f.fault;
  o.dump_dir = f.dump;
  o.out_dir = f.no_results ? "" : f.out;

  if (f.tp || f.cp || f.pp || f.dp || f.ep || f.etp || f.vpp || f.sp) {
    ParallelConfig p;
    p.tp = f.tp ? f.tp : 1;
    p.cp = f.cp ? f.cp : 1;
    p.pp = f.pp ? f.pp : 1;
    p.dp = f.dp;  // 0: derived from the world size by the caller
    p.ep = f.ep ? f.ep : 1;
    p.etp = f.etp;
    p.vpp = f.vpp ? f.vpp : 1;
    p.sp = f.sp;
    p.order = f.order;
    o.parallel = p;
  }

  nlohmann::json& opt = o.options;
  auto put = [&](const char* key, int64_t value) {
    if (value != 0) opt[key] = value;
  };
  put("seq", f.seq);
  put("batch", f.batch);
  put("hidden", f.hidden);
  put("heads", f.heads);
  put("kv_heads", f.kv_heads);
  put("head_dim", f.head_dim);
  put("ffn", f.ffn);
  put("vocab", f.vocab);
  put("experts", f.experts);
  put("topk", f.topk);
  put("layers", f.layers);
  put("microbatches", f.microbatches);
  put("step_factor", f.step_factor);
  if (!f.min_bytes.empty()) opt["min_bytes"] = parse_bytes(f.min_bytes, "--min-bytes");
  if (!f.max_bytes.empty()) opt["max_bytes"] = parse_bytes(f.max_bytes, "--max-bytes");
  if (!f.group.empty()) opt["group"] = f.group;
  if (f.peak_tflops > 0) opt["peak_tflops"] = f.peak_tflops;
  for (const std::string& s : f.sets) set_option(opt, s);
  return o;
}

void resolve_for_world(RunOptions& o, int world) {
  if (!o.parallel || o.parallel->dp != 0) return;
  ParallelConfig& p = *o.parallel;
  int model = p.tp * p.cp * p.pp;
  require(model > 0 && world % model == 0,
          cat("tp*cp*pp = ", p.tp, "*", p.cp, "*", p.pp, " = ", model, " must divide the world size ", world));
  p.dp = world / model;
}

}  // namespace sextant
