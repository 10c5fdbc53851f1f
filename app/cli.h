// Command-line options of `sextant run` (CLI11), turned into RunOptions.
// Problem options (--seq, --set key=value, keys of a --config file) are kept
// as given and parsed once, against the selected cases' declarations, by
// plan_run (harness/options.h).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/config_file.h"
#include "harness/runner.h"

namespace sextant {

// Everything `sextant run` accepts, as parsed (before validation).
struct RunFlags {
  std::vector<std::string> selection;
  std::optional<std::string> ranks, dtypes;
  std::string device = "host", fault, profile = "default";
  double fault_magnitude = 0;  // --fault-magnitude (0: not given)
  std::optional<int64_t> tp, cp, pp, dp, ep, etp, vpp;
  bool sp = false;
  std::string order = "tp-cp-ep-dp-pp";
  bool order_given = false;  // --order on the command line or in --config (else node-aware on several nodes)
  std::optional<int64_t> iters, warmup, blas_threads;
  uint64_t seed = 1234;
  bool no_check = false, no_results = false, quiet = false, per_iteration = false;
  std::string out = "out", dump, junit, traces;
  std::string timeout = "900";     // seconds, or inf
  std::vector<RawOption> problem;  // problem flags and --set, in the order given
};

// Registers the options of `run` on a CLI11 (sub)command.
void add_run_flags(CLI::App& run, RunFlags& flags);
// Applies a --config file's entries that the command line did not set.
void apply_config(CLI::App& run, RunFlags& flags, const std::vector<ConfigEntry>& entries);
// Validates and converts (throws UsageError with a one-line message).
RunOptions to_run_options(const RunFlags& flags);
// Derives --dp from the world size when a config is pinned without it.
void resolve_for_world(RunOptions& options, int world);
// --timeout in seconds; infinity for "inf" (no timeout).
double timeout_seconds(const RunFlags& flags);

}  // namespace sextant
