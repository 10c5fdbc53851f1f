// The 6D training step of the GPT: the pipeline schedule runs the stages'
// forward and backward over the microbatches (accumulating gradients), the
// gradients are summed over the groups that replicate each weight, and Adam
// updates the weights (optionally as a ZeRO-1 distributed optimizer).
//
//   GptTrainer t(config, comms, seed);   // collective over comms
//   t.reset();                           // initial weights and moments
//   StepReport r = t.step();             // loss of the step, timings
//
// Parameters, activations, gradients and Adam state live on the device of
// the kernel communicators (ModelComms::device); token ids, losses and the
// pipeline's bookkeeping stay on the host. On a device the phase clocks are
// read after a synchronize.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/data_parallel/optimizer.h"
#include "kernels/model/gpt_stages.h"
#include "kernels/model/model_comms.h"
#include "kernels/model/step_faults.h"
#include "kernels/pipeline/executor.h"

namespace sextant::model {

struct StepReport {
  double loss = 0;                       // mean over the B * seq predictions of the step's batch
  double seconds = 0;                    // this rank's wall time of the step
  double pipeline_s = 0;                 // forward + backward under the schedule
  double reduce_s = 0;                   // gradient reduction
  double optimizer_s = 0;                // Adam (and the ZeRO all-gather)
  std::vector<pp::TimedAction> actions;  // this rank's, from the executor
  std::map<std::string, double>
      comm_s;  // tp, cp, ep, dp, pp: communication seconds (TimedCommunicator, harness/comm_wrappers.h)
  std::map<std::string, double> exposed_s;  // of which the step waited (all of it for blocking calls)
  double input_wait_s = 0;                  // waiting for a pipeline neighbour's tensor (part of the bubble)
};

class GptTrainer {
 public:
  // Collective over comms. Throws UsageError for configs validate() rejects.
  GptTrainer(const GptConfig& config, ModelComms& comms, uint64_t seed, Fault fault = Fault::none);

  // Initial weights, zero moments, back to the first batch.
  void reset();
  // One step on the next batch.
  StepReport step();

  // The phases of step(), for checks that look at the gradients in between.
  void forward_backward(StepReport& report);
  void reduce_gradients();
  void gather_gradients();  // ZeRO: every block's whole summed gradient (checks only)
  void optimizer_step();
  // Checks: every parameter block's value after the last step, in store
  // order (pending ZeRO gathers stay pending; see Optimizer::parameter_values).
  std::vector<Tensor> parameter_values() { return optimizer_->parameter_values(); }
  // When data-parallel communication happens (not what): between steps.
  void set_overlap(dp::Overlap overlap) { optimizer_->set_overlap(overlap); }
  const dp::Overlap& overlap() const { return optimizer_->overlap(); }
  int bucket_count() const { return optimizer_->bucket_count(); }
  int buckets_started_in_backward() const { return optimizer_->buckets_started_in_backward(); }
  const TokenSource& tokens() const { return tokens_; }

  const GptConfig& config() const { return config_; }
  const ParallelConfig& parallel() const { return comms_.parallel; }
  ParamStore& params() { return *store_; }
  GptStages& stages() { return *stages_; }
  pp::PipelineExecutor& executor() { return *executor_; }
  const pp::Schedule& schedule() const { return executor_->schedule(); }
  ModelComms& comms() { return comms_; }
  int64_t next_data_step() const { return data_step_; }

 private:
  LayerEnv layer_env();
  void synchronize() const;  // waits for the device (nothing on the host)

  GptConfig config_;
  ModelComms& comms_;
  uint64_t seed_;
  Fault fault_;
  std::unique_ptr<tp::TpGroup> tp_;
  std::unique_ptr<ParamStore> store_;
  std::unique_ptr<GptStages> stages_;
  std::unique_ptr<pp::PipelineExecutor> executor_;
  std::unique_ptr<dp::Optimizer> optimizer_;
  TokenSource tokens_;
  int64_t data_step_ = 0;
};

}  // namespace sextant::model
