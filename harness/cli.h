// Command-line options of `sextant run` (CLI11), turned into RunOptions.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "harness/runner.h"

namespace sextant {

// Everything `sextant run` accepts, as parsed (before validation).
struct RunFlags {
  std::vector<std::string> selection;
  std::string ranks, dtypes, device = "host", fault, group, profile = "default";
  int tp = 0, cp = 0, pp = 0, dp = 0, ep = 0, etp = 0, vpp = 0;
  bool sp = false;
  std::string order = "tp-cp-ep-dp-pp";
  int iters = -1, warmup = -1;
  uint64_t seed = 1234;
  bool no_check = false, no_results = false, quiet = false;
  std::string out = "out", dump, junit;
  double timeout = 900;
  int blas_threads = 0;
  double peak_tflops = 0;
  // Problem options (0 / empty: the case's default).
  int64_t seq = 0, batch = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  int64_t experts = 0, topk = 0, layers = 0, microbatches = 0;
  std::string min_bytes, max_bytes;
  int step_factor = 0;
  std::vector<std::string> sets;  // key=value
};

// Registers the options of `run` on a CLI11 (sub)command.
void add_run_flags(CLI::App& run, RunFlags& flags);
// Validates and converts (throws UsageError with a one-line message).
RunOptions to_run_options(const RunFlags& flags);
// Derives --dp from the world size when a config is pinned without it.
void resolve_for_world(RunOptions& options, int world);

}  // namespace sextant
