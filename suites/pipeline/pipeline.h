// The pipeline suite: schedules (kernels/pipeline) running pre-LN MLP blocks
// (kernels/tensor_parallel) as their stages, so TP (+ SP) and DP compose with
// PP: the parallel config is tp x pp x dp. One case per schedule -- gpipe,
// 1f1b, interleaved, zb-h1, zb-v, dualpipe-v -- plus csv, a user's own
// schedule (--set schedule_file=PATH), swept over pp in {2, 4}, microbatches
// m in {pp, 2pp, 4pp} and the chunks per rank v each schedule accepts.
//
// One step = every microbatch's forward and backward under the schedule,
// weight gradients accumulated over microbatches (zero-bubble schedules run
// the real I / W split), then reduced over TP (SP's replicated parameters)
// and DP. The loss on the last stage is
//   loss = sum over microbatches and tokens of 0.5 ||y - target||^2 / (M b s)
// with M = dp * m microbatches of [b, s, h] in the global batch. Conformance:
// the loss and every weight gradient after one step against the float64
// reference (reference/mlp.h composed over layers and microbatches) and the
// same stages run on one rank, microbatch after microbatch.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/case.h"
#include "harness/grid_comms.h"
#include "kernels/pipeline/executor.h"
#include "kernels/pipeline/pipeline_faults.h"
#include "kernels/pipeline/schedule.h"
#include "kernels/pipeline/schedules.h"
#include "suites/pipeline/mlp_stages.h"

namespace sextant::pipeline {

// Where the suite sits in listings and reports (suites in ascending order).
inline constexpr int kSuiteOrder = 60;

// A schedule case: a generated schedule (a row of kernels/pipeline/schedules.h,
// which says the chunks per rank and microbatches it takes), or csv, the
// user's --set schedule_file.
struct ScheduleKind {
  const char* name = "";
  const char* summary = "";
  const pp::ScheduleInfo* generated = nullptr;  // null: csv
  bool from_file() const { return generated == nullptr; }
};

// The problem of one instance, from its params and parallel config.
struct Problem {
  std::string schedule;                     // a generated schedule's name, or "csv"
  std::optional<pp::ScheduleId> generated;  // none: csv
  std::string schedule_file;                // csv only
  int pp = 1, tp = 1, dp = 1, chunks = 1;
  int stages = 1;        // pp * chunks (csv: the stages its rows run)
  int microbatches = 1;  // m per pipeline (DP replica)
  int64_t layers = 1, hidden = 0, ffn = 0, batch = 1, seq = 1;
  bool sp = false;
  int total_microbatches() const { return dp * microbatches; }
};
Problem problem_of(const CaseConfig& c);

// Instances at req.ranks, and the bad-input rules (UsageError; a user CSV
// that breaks a schedule rule throws pp::ScheduleError with the grid).
std::vector<OptionSpec> pipeline_options();
MemoryEstimate pipeline_memory(const CaseConfig& c);
std::vector<CaseConfig> sweep(const SweepRequest& req, const ScheduleKind& kind);
void validate_problem(const CaseConfig& c, const ScheduleKind& kind);

// The schedule an instance runs: generated, or loaded from its CSV file, with
// a planted schedule fault (missing_backward, deadlock) applied. Not validated.
pp::Schedule build_schedule(const Problem& p, pp::Fault fault);

// One rank's state of an instance.
struct PipelineState {
  Problem p;
  pp::Schedule schedule;
  std::unique_ptr<MlpStages> stages;
  std::unique_ptr<pp::PipelineExecutor> executor;
  Communicator* pp_comm = nullptr;
  Communicator* dp_comm = nullptr;
  Communicator* host = nullptr;          // the instance's ranks (checks, metrics)
  Communicator* self = nullptr;          // this rank alone: the one-rank baseline
  std::unique_ptr<GridComms> host_grid;  // over MPI, where the kernel communicators are on the device
  int tp_rank = 0, dp_rank = 0, pp_rank = 0;
  uint64_t seed = 0;
  DType dtype = DType::f32;
  Device device = Device::host;  // where the stages compute (mpi-staged or nccl on cuda)
  std::string id, out_dir;
  double p2p_latency = 0;  // s, one boundary message between neighbours
  // Per step run: this rank's recorded actions and the CPU seconds of each.
  std::vector<std::vector<pp::TimedAction>> steps;
  std::vector<std::vector<double>> steps_cpu;
};

// Setup and the timed step (driver.cc).
PipelineState setup_state(CaseContext& ctx);
void run_step(PipelineState& s);  // zero grads, the schedule, TP/DP gradient reduction

void check(PipelineState& s, Checker& checker);                        // check.cc
Metrics pipeline_metrics(PipelineState& s, const RegionTimes& times);  // metrics.cc

CaseDef make_pipeline_case(const ScheduleKind& kind);

}  // namespace sextant::pipeline
