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

#include "kernels/model/gpt_stages.h"
#include "kernels/model/model_comms.h"
#include "kernels/model/optimizer.h"
#include "kernels/pipeline/executor.h"

namespace sextant::model {

// Planted faults (docs/CONFORMANCE.md; each one a bug real 6D code has had):
//   no_cp_grad_reduce       dense gradients summed over dp only, not dp x cp
//   experts_over_dp         expert gradients summed over the dense DP group instead of EDP
//   no_sp_layernorm_reduce  under SP, LayerNorm gradients not summed over TP
//   loss_token_count        each rank averages the loss over its own tokens, not the B * seq of the batch
//   stage_drops_residual    after a pipeline stage boundary the first layer drops its residual
//   early_grad_bucket       overlap_grad_reduce: a bucket is reduced before its last weight gradient is written
//   unwaited_param_gather   overlap_param_gather: the forward reads parameters before their all-gather completes
const std::vector<std::string>& step_fault_names();
// Whether a fault can change the results of this config (it needs the dimension it breaks).
bool step_fault_visible(const std::string& fault, const GptConfig& c, const ParallelConfig& p);

struct StepReport {
  double loss = 0;                          // mean over the B * seq predictions of the step's batch
  double seconds = 0;                       // this rank's wall time of the step
  double pipeline_s = 0;                    // forward + backward under the schedule
  double reduce_s = 0;                      // gradient reduction
  double optimizer_s = 0;                   // Adam (and the ZeRO all-gather)
  std::vector<pp::TimedAction> actions;     // this rank's, from the executor
  std::map<std::string, double> comm_s;     // tp, cp, ep, dp, pp: communication seconds (timed_comm.h)
  std::map<std::string, double> exposed_s;  // of which the step waited (all of it for blocking calls)
  double input_wait_s = 0;                  // waiting for a pipeline neighbour's tensor (part of the bubble)
};

class GptTrainer {
 public:
  // Collective over comms. Throws UsageError for configs validate() rejects.
  GptTrainer(const GptConfig& config, ModelComms& comms, uint64_t seed, const std::string& fault = "");

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
  void set_overlap(Overlap overlap) { optimizer_->set_overlap(overlap); }
  const Overlap& overlap() const { return optimizer_->overlap(); }
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
  std::string fault_;
  std::unique_ptr<tp::TpGroup> tp_;
  std::unique_ptr<ParamStore> store_;
  std::unique_ptr<GptStages> stages_;
  std::unique_ptr<pp::PipelineExecutor> executor_;
  std::unique_ptr<Optimizer> optimizer_;
  TokenSource tokens_;
  int64_t data_step_ = 0;
};

}  // namespace sextant::model
