// The step suite: the full 6D training step of a small GPT (kernels/model:
// TP x SP x CP x EP x PP x DP, dense and MoE layers, Adam or ZeRO-1) against
// the float64 single-device reference (reference/gpt.h), step after step.
//
//   train   K steps from the same initial weights and data: the loss of every
//           step, every gradient (gathered from its shards) and every
//           parameter after each step against the reference, with the same
//           model at world size 1 as the baseline (docs/CONFORMANCE.md); MoE
//           routing compared token by token. Timed: one training step, with
//           tokens/s, TFLOP/s, MFU, bubble and the time split per dimension.
//   fp8     train with a dense model and FP8 linears (QKV, output, fc1, fc2)
//           under each of TransformerEngine's recipes (bf16 storage): the
//           scales every rank of a layer's TP x DP x CP group shares, the
//           fp8_model bound, MFU against the FP8 and the bf16 peak.
//   sweep   one model over every valid factorisation of the rank count (or a
//           given list), each config timed in turn, ranked by throughput next
//           to the planner's prediction.
#pragma once

#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "harness/case.h"
#include "harness/memory_use.h"
#include "kernels/model/trainer.h"
#include "kernels/planner/calibration.h"
#include "kernels/planner/step_cost.h"

namespace sextant::step {

// Where the suite sits in listings and reports (suites in ascending order).
inline constexpr int kSuiteOrder = 70;

// ---- configs.cc: sizes per profile, the configs of a rank count, rules.

// Model and step options of a profile (ci: tiny, default: a small MoE model, configs.cc).
nlohmann::json default_params(const SweepRequest& req);
// --set sweep (train) and --set configs (sweep): the conformance recipes,
// every factorisation of the rank count, or else a list of configs.
inline constexpr std::string_view kRecipesMode = "recipes";
inline constexpr std::string_view kAllConfigs = "all";
// The step options a user sets over a recipe's (microbatches, schedule, zero, overlap, ...).
const std::vector<std::string>& step_keys();
// A parallel config with its step options (schedule, microbatches, cp_comm, ...).
struct Recipe {
  ParallelConfig parallel;
  nlohmann::json options = nlohmann::json::object();
};
// The conformance configs of a rank count: together they exercise every
// dimension, one of them all six at once from 16 ranks.
std::vector<Recipe> recipes(int ranks, Profile profile);
// The fp8 case's: a dense model with FP8 linears under each recipe of
// TransformerEngine's across the rank counts (bf16 storage).
std::vector<Recipe> fp8_recipes(int ranks);
// r with a dense model and FP8 linears (current scaling unless r or the user names a recipe).
Recipe with_fp8_linears(Recipe r);
// Every valid factorisation of `ranks` for the model (tp, cp, pp, dp, ep;
// SP whenever tp > 1; 1F1B with 2 pp microbatches where the batch allows).
std::vector<Recipe> factorisations(int ranks, const nlohmann::json& params);
// A config with the default step options for it (microbatches).
Recipe recipe_for(const ParallelConfig& p, const nlohmann::json& params);
// The model a recipe runs: the user's params, and the recipe's options where
// the user set none.
model::GptConfig recipe_model(const Recipe& r, const nlohmann::json& params);
// "tp2-sp-cp2-pp2-dp2-ep2" style names, both ways.
std::string recipe_name(const ParallelConfig& p);
ParallelConfig parse_recipe(const std::string& text, int ranks);
// params + recipe options, validated; the case's CaseConfig.
CaseConfig make_config(const SweepRequest& req, const nlohmann::json& params, const Recipe& r, DType dtype);
// Bad input (throws UsageError with one line).
void validate_config(const CaseConfig& c);
// The cases (train.cc), for tests that plan them directly.
CaseDef train_case();
CaseDef fp8_case();
// The options both cases declare (model sizes and step options), then the case's own.
std::vector<OptionSpec> model_options(std::vector<OptionSpec> case_options);
// Parameters with gradients and Adam state, and the activations of a step,
// per rank; the group's rank 0 adds the float64 reference model and step.
MemoryEstimate step_memory(const CaseConfig& c);
// The dtypes step/train and step/sweep run: f32, and bf16 (mixed precision) for dense
// models only. bf16 rounding moves router logits enough to send some tokens
// to other experts than the float64 reference does (measured: 1 of 256 at
// the ci sizes), and a flipped route makes the gradients incomparable.
void validate_dtype(DType dtype, const model::GptConfig& model);

// ---- calibrate.cc: the sweep's own calibration of the planner.

// Measures what `queries` asks for on every rank of comm (collective), for
// `model`'s dimensions (hidden size, the MoE router's experts and top-k).
// Compute rates are a rank's with a core to itself (short windows, CPU
// time; where the node's ranks_per_node ranks share its cores, each call
// after another rank's turn on the core, as in the step); links are wall
// time, latency in loops of small messages and bandwidth from large ones
// sent as the step sends them. The reference kernel runs before each
// compute sample: a sample taken while the machine ran at another speed
// than at the start is scaled back to the start's (the calibration's
// reference_s).
plan::Calibration calibrate_here(Communicator& comm, const plan::CostQueries& queries, const model::GptConfig& model,
                                 int ranks_per_node);

// How the ranks fare where they share the machine (the load changes, so
// it is measured while the sweep runs). The compute slowdown comes from the
// scheduler's own accounting (/proc/self/task/*/schedstat: time on a CPU
// and time runnable but waiting for one): a rank runnable for r seconds of
// which it ran c computes r / c times slower than alone on a core; measured
// around the steps. Where schedstat is missing: a 128^3 sgemm repeated for
// about 5 ms on every rank at once against its time in short windows. The
// synchronisation cost: 5 rounds of about 1 ms of that sgemm each ended by
// an 8-byte all-reduce, less the same rounds without it, 3 times in turn;
// on all the ranks, and on groups of each size asked for (consecutive
// ranks, all groups at once).
// The machine's speed: the calibration's reference kernel (the same sgemm,
// every rank at once, on the compute clock) timed again. The planner takes
// the medians over the timed iterations.
struct Contention {
  double slowdown = 1;                 // the slowest rank's
  double sync_s = 0;                   // per blocking collective, beyond its link time ...
  double sync_chunk_s = 0;             // ... after this much compute (uncontended)
  double sync_short_s = 0;             // the same after one probe call of compute ...
  double sync_short_chunk_s = 0;       // ... this long (uncontended)
  std::map<int, double> sync_group_s;  // sync_s on groups of n ranks (1 < n < all)
  double reference_s = 0;              // plan::Calibration::reference_s, now
};
// Seconds the threads of this process spent on a CPU, and runnable waiting
// for one; available false where /proc/self/task/*/schedstat is missing.
struct SchedTimes {
  double on_cpu = 0, waiting = 0;
  bool available = false;
};
SchedTimes sched_times();

// The reference kernel: a 128^3 sgemm on operands of its own (in cache: it
// measures the cores' speed, not memory).
class ReferenceSgemm {
 public:
  ReferenceSgemm();
  void run();
  float result() const { return c_[0]; }

 private:
  std::vector<float> a_, b_, c_;
};

class ContentionProbe {
 public:
  // Collective. group_sizes: the groups to measure the synchronisation on
  // besides all the ranks (sizes that do not divide the ranks are skipped).
  ContentionProbe(Communicator& comm, const std::set<int>& group_sizes, int ranks_per_node);
  // Around the work whose slowdown is wanted (this rank).
  void start();
  void stop();
  // Collective: the contention since the last measure, and a sync probe.
  Contention measure(Communicator& comm);

 private:
  double probed_slowdown(Communicator& comm);
  // Seconds each all-reduce on `group` adds to rounds of per_round sgemm calls.
  double sync_wait(Communicator& comm, Communicator& group, int per_round);
  ReferenceSgemm kernel_;
  bool shared_cores_ = false;                            // this rank's node has more ranks x threads than cores
  std::map<int, std::unique_ptr<Communicator>> groups_;  // by size
  double uncontended_s_ = 0;
  int calls_ = 1;
  SchedTimes started_, spent_;  // at start(); accumulated between start() and stop()
};

// ---- the train case.

// Measured host rates, for MFU against what this machine really does.
struct HostRates {
  double sgemm_tflops_per_rank = 0;  // f32 gemm while every rank runs one
  double allreduce_busbw_GBps = 0;   // over the instance's ranks (0 at one rank)
  double allreduce_latency_us = 0;
};
HostRates measure_host_rates(Communicator& comm);

struct State {
  CaseConfig config;
  model::GptConfig model;
  uint64_t seed = 0;
  int steps = 3;  // K
  Communicator* host = nullptr;
  Communicator* self = nullptr;
  std::unique_ptr<Communicator> host_self_split;  // on a device: this rank alone over MPI (self is the kernel backend)
  Device device = Device::host;
  std::unique_ptr<model::ModelComms> comms;
  std::unique_ptr<model::GptTrainer> trainer;
  std::vector<model::StepReport> history;  // the timed steps
  std::vector<double> check_losses;        // the conformance run's K losses
  HostRates rates;
  MemoryUse memory_baseline;  // counted on the step's device before the trainer was built
  nlohmann::json options;     // peak_tflops override etc.
  // A host communicator of this rank alone: self on the host.
  Communicator& host_self() { return host_self_split ? *host_self_split : *self; }
};

State setup_train(CaseContext& ctx);
// check.cc: conformance of K steps.
void check_train(State& s, Checker& checker);
// metrics.cc
Metrics train_metrics(State& s, const RegionTimes& times);
// One more step with its ops timed (harness/op_times.h): what the compute
// is made of, per op name, mean over ranks. Not one of the timed steps,
// whose figures stay free of the timers' cost (two events per op call on a
// GPU). Collective over host.
nlohmann::json op_time_split(model::GptTrainer& trainer, Communicator& host);

// A stored host step/sweep case replayed through this build's calibrated
// planner: its configs, calibration and contention (the record's params,
// rank count and metrics; `cores` and `blas_threads` from its results
// file's system), predicted again, beside the measured and the recorded
// prediction. Throws UsageError naming a metric the record lacks.
struct ReplayedConfig {
  std::string config;
  double measured_s = 0;
  double recorded_s = std::numeric_limits<double>::quiet_NaN();  // NaN: the sweep predicted none
  double replayed_s = std::numeric_limits<double>::quiet_NaN();  // NaN: the planner rejects the config
};
std::vector<ReplayedConfig> replay_sweep(const nlohmann::json& params, int ranks, const nlohmann::json& metrics,
                                         int cores, int blas_threads);
// memory.cc: counting from before the trainer is built; the peak by kind
// beside the planner's estimate.
void start_memory_count(State& s);
void add_memory_metrics(Metrics& m, State& s);
// The per-rank host peak (estimate) or the user's --peak-tflops, and its label.
std::pair<double, std::string> peak_per_rank(const nlohmann::json& options, int ranks, Device device);
// The dense FP8 peak per rank and its label (FP8 linears): the device
// table's on a GPU, the host's f32 estimate on the host.
std::pair<double, std::string> fp8_peak_per_rank(const nlohmann::json& options, int ranks, Device device);

}  // namespace sextant::step
