// A suite's conformance tests run it through the same registry and runner the
// CLI uses, on the MPI world (collective over it; records complete on rank 0).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/comm_nccl_rules.h"
#include "harness/comm_staged.h"
#include "harness/runner.h"
#include "harness/testing/mpi_world.h"

namespace sextant::testing {

// A registry holding just the cases of `suite` among those linked in.
inline Registry suite_registry(const std::string& suite) {
  const Registry all = all_suites();
  Registry r;
  for (const CaseDef& c : all.cases())
    if (c.suite == suite) r.add(c);
  return r;
}

// Profile ci, no warmup and one timed iteration: tiny problems, and traffic
// counters that read bytes per iteration exactly.
inline RunOptions ci_options(std::vector<std::string> selection) {
  RunOptions o;
  o.selection = std::move(selection);
  o.profile = Profile::ci;
  o.timing = {0, 1};
  return o;
}

// Plans and executes `o` on the world.
inline std::vector<CaseRecord> run_suite(const std::string& suite, const RunOptions& o) {
  const Registry r = suite_registry(suite);
  return execute_plan(plan_run(r, o, world().size()), world(), o, {});
}

// The GPU path (callers skip first with SEXTANT_REQUIRE_GPU): every kernel on
// device tensors, device buffers moved by MPI through host memory (staged),
// so the ranks of a test may share one GPU. Compiles in host-only builds too.
inline std::vector<CaseRecord> run_suite_on_gpu(const std::string& suite, RunOptions o) {
  o.device = Device::cuda;
  const Registry r = suite_registry(suite);
  std::shared_ptr<StagingMemory> memory = cuda_staging();
  return execute_plan(plan_run(r, o, world().size()), world(), o, {},
                      [memory](MpiCommunicator& group) -> std::unique_ptr<Communicator> {
                        return StagedCommunicator::create(group, memory);
                      });
}

// Host buffers under NCCL's point-to-point rules (NcclRulesCommunicator: no
// tags, sends that wait for their receive, one stream): what a suite sends
// point to point must be ordered and grouped so that NCCL cannot hang on it.
inline std::vector<CaseRecord> run_suite_under_nccl_rules(const std::string& suite, const RunOptions& o) {
  const Registry r = suite_registry(suite);
  return execute_plan(
      plan_run(r, o, world().size()), world(), o, {},
      [](MpiCommunicator& group) -> std::unique_ptr<Communicator> { return NcclRulesCommunicator::create(group); });
}

// A metric's value ({"value": ..., "unit": ...} in the record).
inline double metric(const CaseRecord& r, const std::string& name) {
  return r.metrics.at(name).at("value").get<double>();
}

}  // namespace sextant::testing
