// The sweep case's state (sweep.cc) and its planner side (sweep_planner.cc):
// each config's trainer and timings, and the two predictions of its step.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/planner/calibration.h"
#include "kernels/planner/step_cost.h"
#include "suites/step/step.h"

namespace sextant::step {

struct Entry {
  std::string name;
  ParallelConfig parallel;
  model::GptConfig model;
  std::unique_ptr<GridComms> grid;
  std::unique_ptr<model::ModelComms> comms;
  std::unique_ptr<model::GptTrainer> trainer;
  // Per iteration, each the max over ranks: the step's time and its phases
  // (model::StepReport: forward and backward, gradient reduction, optimizer).
  std::vector<double> seconds, pipeline_s, reduce_s, optimizer_s;
  // Per iteration, each the max over ranks: the communication of the
  // forward and backward the step waited on, per dimension (kExposedDims).
  std::vector<std::array<double, 4>> exposed_s;
};

// The dimensions whose exposed communication falls inside the forward and
// backward (dp's is the gradient reduction, timed as a phase of its own).
constexpr std::array<const char*, 4> kExposedDims = {"tp", "cp", "ep", "pp"};

struct SweepState {
  CaseConfig config;
  uint64_t seed = 0;
  Communicator* host = nullptr;
  Communicator* self = nullptr;
  std::unique_ptr<Communicator> host_self;  // on a device: this rank alone over MPI, for the baseline
  Device device = Device::host;
  HostRates rates;
  std::optional<plan::Calibration> calibration;  // host runs
  std::unique_ptr<ContentionProbe> probe;        // host runs
  std::vector<Contention> contention;            // one per iteration
  int ranks_per_node = 1;
  std::vector<Entry> entries;
};

// What the configs ask of a calibration: gemm shapes, attention blocks,
// elementwise sizes, MoE token counts, group sizes.
plan::CostQueries cost_queries(const SweepState& s, int ranks_per_node);

// The calibration: measured here, on every rank at once, at the shapes the
// configs ask for; or read from --set calibration=FILE.
plan::Calibration calibration_for(SweepState& s, const plan::CostQueries& queries);

// The reference kernel's time beside the steps over its time in the
// calibration (1 where either is missing).
double reference_ratio(const SweepState& s, const Contention& contention);

// The calibrated planner's step time and its split; NaN (null) where it
// rejects the config, and on a device (no calibration of the device here).
std::pair<double, nlohmann::json> calibrated_step(const SweepState& s, const Entry& e, const Contention& contention);

// The roofline planner's step time for this config on "this machine"; NaN
// where the planner rejects it, and on a device.
double roofline_step(const SweepState& s, const Entry& e);

}  // namespace sextant::step
