// The runner: turns options into a validated plan of case instances across
// rank counts, then runs them on sub-communicators of the world.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case.h"
#include "harness/comm_mpi.h"
#include "harness/results.h"

namespace sextant {

// One option value as given: text from the command line, or a typed value
// from a --config file; source names where it came from ("--seq",
// "--set seq", "run.toml: seq").
struct RawOption {
  std::string key;
  nlohmann::json value;
  std::string source;
  // Given for whichever selected case declares it (an expectations file's
  // suspect rules), not refused when none does.
  bool where_declared = false;
};

struct RunOptions {
  std::vector<std::string> selection;                 // "suite" or "suite/case"; empty: all
  std::vector<int> rank_counts;                       // empty: powers of two up to the world (and the world)
  std::vector<DType> dtypes;                          // empty: each case's defaults
  std::optional<ParallelConfig> parallel;             // pinned by --tp/--cp/...
  bool vpp_given = false;                             // --vpp was given (a pinned 1 included)
  nlohmann::json options = nlohmann::json::object();  // problem options (--seq, --set k=v)
  Profile profile = Profile::standard;
  TimingPlan timing;
  Device device = Device::host;
  std::string fault;
  double fault_magnitude = 0;  // --fault-magnitude (0: the fault's own default)
  uint64_t seed = 1234;
  bool check = true;
  std::string dump_dir;
  std::string out_dir;    // the results folder (the caller writes the results and the journal there)
  std::string trace_dir;  // where cases write side files (pipeline traces); empty: none
  // Option values as the user gave them (flags, --set, --config), parsed
  // against the selected cases' declarations into `options` by plan_run.
  std::vector<RawOption> raw_options;
  // Memory one rank may use (0: not checked): a case whose estimate exceeds
  // it is refused when the user chose its sizes, else skipped with the reason.
  double host_memory_per_rank = 0, device_memory_per_rank = 0;
  // The node of each world rank (harness/topology.h; empty: not detected).
  // On several nodes, configs get the node-aware rank order unless the user
  // gave --order.
  std::vector<int> node_of_rank;
  bool order_given = false;
  // How the binary runs the plan (app/run_command.cc).
  std::optional<int64_t> blas_threads;  // OpenBLAS threads per rank (default: cores / ranks per node)
  std::string junit;                    // JUnit XML path or folder ("": none)
  bool quiet = false;                   // print only the summary
  double timeout_s = 900;               // per case and rank-count boundary (infinity: none)
};

struct PlannedCase {
  const CaseDef* def = nullptr;
  CaseConfig config{};
  std::string skip_reason{};  // set: planned but not run (a swept config that does not fit)
};

// Validates everything up front (throws UsageError before anything runs), so
// bad input never leaves a partial results file: options against the cases'
// declarations, every config's rules, the memory estimates. A config the
// case's own sweep produced that breaks a rule or does not fit is skipped
// with the reason, as long as another config of the case runs; configs the
// user pinned (--tp ...) are refused instead.
std::vector<PlannedCase> plan_run(const Registry& registry, const RunOptions& options, int world_size);
// The typed options of a run: raw_options parsed and every key checked
// against the declarations of `cases` (UsageError naming the key and rule).
nlohmann::json resolve_options(const std::vector<const CaseDef*>& cases, const RunOptions& options);

// The rank counts a plan uses, ascending.
std::vector<int> plan_rank_counts(const std::vector<PlannedCase>& plan);

struct RunHooks {
  std::function<void(const PlannedCase&, size_t index, size_t total)> started;
  std::function<void(const PlannedCase&, const CaseRecord&, size_t index, size_t total)> finished;
};

// Makes the kernel communicator for a group (MPI itself on the host; NCCL or
// staged communicators on GPUs). Collective over `group`.
using CommFactory = std::function<std::unique_ptr<Communicator>(MpiCommunicator& group)>;

// Collective over world. Records are complete on world rank 0.
std::vector<CaseRecord> execute_plan(const std::vector<PlannedCase>& plan, MpiCommunicator& world,
                                     const RunOptions& options, const RunHooks& hooks,
                                     const CommFactory& make_kernel_comm = {});

// Runs one instance on `group` (collective over it). Exposed for tests.
CaseRecord run_case(const PlannedCase& planned, MpiCommunicator& group, const RunOptions& options,
                    const CommFactory& make_kernel_comm = {});

}  // namespace sextant
