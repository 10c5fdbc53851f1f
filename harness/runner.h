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

struct RunOptions {
  std::vector<std::string> selection;     // "suite" or "suite/case"; empty: all
  std::vector<int> rank_counts;           // empty: powers of two up to the world (and the world)
  std::vector<DType> dtypes;              // empty: each case's defaults
  std::optional<ParallelConfig> parallel; // pinned by --tp/--cp/...
  nlohmann::json options = nlohmann::json::object();  // problem options (--seq, --set k=v)
  std::string profile = "default";
  TimingPlan timing;
  Device device = Device::host;
  std::string fault;
  uint64_t seed = 1234;
  bool check = true;
  std::string dump_dir;
  std::string out_dir;  // where sides files (traces) go; results are written by the caller
};

struct PlannedCase {
  const CaseDef* def = nullptr;
  CaseConfig config;
};

// Validates everything up front (throws UsageError before anything runs), so
// bad input never leaves a partial results file.
std::vector<PlannedCase> plan_run(const Registry& registry, const RunOptions& options, int world_size);

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
