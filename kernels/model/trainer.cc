#include "kernels/model/trainer.h"

#include <algorithm>

#include "harness/device.h"
#include "harness/error.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/pipeline/generators.h"

namespace sextant::model {

const std::vector<std::string>& step_fault_names() {
  static const std::vector<std::string> names = {
      "no_cp_grad_reduce",    "experts_over_dp",   "no_sp_layernorm_reduce", "loss_token_count",
      "stage_drops_residual", "early_grad_bucket", "unwaited_param_gather"};
  return names;
}

bool step_fault_visible(const std::string& fault, const GptConfig& c, const ParallelConfig& p) {
  if (fault == "no_cp_grad_reduce") return p.cp > 1;
  if (fault == "no_sp_layernorm_reduce") return p.sp && p.tp > 1;
  if (fault == "loss_token_count") return p.dp * p.cp > 1;
  if (fault == "stage_drops_residual") return p.pp * p.vpp > 1;
  if (fault == "early_grad_bucket") return c.overlap_grad_reduce;
  if (fault == "unwaited_param_gather") return c.overlap_param_gather;  // (ZeRO; shows from the second step)
  if (fault == "experts_over_dp") {  // only where the dense DP group is not the EDP group
    if (c.moe_layer_count() == 0) return false;
    const RankGrid grid(p, p.world());
    for (int r = 0; r < p.world(); ++r)
      if (grid.group(Dim::dp, r) != grid.group(Dim::edp, r)) return true;
    return false;
  }
  throw UsageError(cat("--fault '", fault, "' is not a step fault (known: ", join(step_fault_names(), ", "), ")"));
}

namespace {
bool has(const std::string& fault, const char* name) { return fault == name; }
}  // namespace

// Device work is asynchronous (one compute stream; NCCL enqueues too): host
// clocks read after it finished.
void GptTrainer::synchronize() const {
  if (comms_.device != Device::host) cuda_synchronize();
}

GptTrainer::GptTrainer(const GptConfig& config, ModelComms& comms, uint64_t seed, const std::string& fault)
    : config_(config), comms_(comms), seed_(seed), fault_(fault), tokens_(token_source(config, seed)) {
  const ParallelConfig& p = comms.parallel;
  validate(config_, p);
  if (!fault_.empty()) step_fault_visible(fault_, config_, p);  // rejects unknown names
  tp_ = std::make_unique<tp::TpGroup>(tp::TpGroup{*comms.tp, p.sp, config.regather});
  pp::Schedule schedule = pp::make_schedule(config.schedule, p.pp, config.microbatches, p.vpp);
  const std::vector<int> stages = schedule.stages_of(comms.pp->rank());
  std::vector<int> layers;
  const int64_t per_stage = layers_per_stage(config, p);
  for (int s : stages)
    for (int64_t l = s * per_stage; l < (s + 1) * per_stage; ++l) layers.push_back(static_cast<int>(l));
  const bool first = std::count(stages.begin(), stages.end(), 0) > 0;
  const bool last = std::count(stages.begin(), stages.end(), schedule.stages - 1) > 0;
  store_ = std::make_unique<ParamStore>(config, p, comms.coords, layers, first, last, comms.device);
  const GptStages::Faults stage_faults{has(fault_, "stage_drops_residual"), has(fault_, "early_grad_bucket")};
  stages_ = std::make_unique<GptStages>(config, p, stages, *store_, layer_env(), stage_faults);
  pp::ExecutorOptions options;
  options.host = comms.host_pp.get();
  executor_ = std::make_unique<pp::PipelineExecutor>(std::move(schedule), *comms.pp, *stages_, options);
  const OptimizerFaults faults{has(fault_, "no_cp_grad_reduce"), has(fault_, "experts_over_dp"),
                               has(fault_, "no_sp_layernorm_reduce"), has(fault_, "unwaited_param_gather")};
  const OptimizerComms oc{comms.tp.get(), p.sp, comms.dp.get(), comms.dp_cp.get(), comms.edp.get()};
  optimizer_ = std::make_unique<Optimizer>(*store_, oc, config, faults);
  stages_->set_hooks(optimizer_.get());
  reset();
}

LayerEnv GptTrainer::layer_env() {
  LayerEnv env;
  env.tp = tp_.get();
  const ParallelConfig& p = comms_.parallel;
  env.cp_options.causal = true;
  env.cp_options.layout = config_.cp_layout;
  env.cp_options.seq = config_.seq;
  env.cp_options.packing = row_packing(config_);
  env.cp_options.kv_exchange = config_.cp_comm == CpComm::allgather ? cp::KvExchange::allgather : cp::KvExchange::ring;
  env.cp_options.attention_impl = config_.attention_impl;
  if (p.cp > 1) {
    switch (config_.cp_comm) {
      case CpComm::p2p:
      case CpComm::allgather: env.cp.kv = comms_.cp.get(); break;
      case CpComm::a2a: env.cp.a2a = comms_.cp.get(); break;
      case CpComm::a2a_p2p: env.cp = {comms_.cp_a2a.get(), comms_.cp_ring.get()}; break;
    }
  }
  // Dropless top-k routing, aux and z losses off (the moe suite covers them).
  // The router's token group is this rank alone: its statistics only feed
  // those losses, and its weight gradient is summed with the other
  // replicated gradients (TP under SP, then dp x cp). Expert gradients are
  // summed over EDP once per step by the optimizer, not per microbatch.
  env.moe_options.router.experts = config_.experts;
  env.moe_options.router.topk = config_.topk;
  env.moe_options.dispatcher = config_.dispatcher;
  env.moe_comms = {comms_.self.get(), comms_.ep.get(), comms_.etp.get(), comms_.self.get()};
  env.microbatches = config_.microbatches;
  env.progress = [this] { optimizer_->progress(); };  // (the optimizer exists before any step runs)
  return env;
}

void GptTrainer::reset() {
  optimizer_->reset();  // first: pending parameter gathers complete before the weights are drawn again
  store_->initialize(seed_);
  data_step_ = 0;
}

void GptTrainer::forward_backward(StepReport& report) {
  const ParallelConfig& p = comms_.parallel;
  std::vector<MicrobatchData> data;
  for (int mb = 0; mb < config_.microbatches; ++mb)
    data.push_back(microbatch_data(config_, p, comms_.coords, tokens_, data_step_, mb));
  // The loss is the mean over every prediction of the global batch. The
  // planted fault averages over this rank's own tokens instead.
  const double tokens = has(fault_, "loss_token_count")
                            ? static_cast<double>(config_.batch / p.dp) * (config_.seq / p.cp)
                            : static_cast<double>(config_.tokens_per_step());
  stages_->begin_step(std::move(data), 1.0 / tokens);
  store_->zero_grads();
  optimizer_->begin_backward();
  synchronize();
  const double start = now_seconds();
  report.actions = executor_->run_step();
  // Every forward waited for its parameters (a no-op), unless the planted
  // fault skipped those waits: then the new parameters land only now.
  optimizer_->finish_param_gathers();
  synchronize();
  report.pipeline_s = now_seconds() - start;
  // One TP rank of each last-stage replica reports its tokens' share.
  const bool reports = store_->holds("head") && comms_.tp->rank() == 0;
  report.loss = comms_.world->all_reduce_value(reports ? stages_->loss() : 0.0, ReduceOp::sum);
  ++data_step_;
}

void GptTrainer::reduce_gradients() { optimizer_->reduce_gradients(); }
void GptTrainer::gather_gradients() { optimizer_->gather_gradients(); }
void GptTrainer::optimizer_step() { optimizer_->step(); }  // (it refreshes the bf16 copies of what it writes)

StepReport GptTrainer::step() {
  StepReport report;
  comms_.clocks->reset();
  synchronize();
  const double start = now_seconds();
  forward_backward(report);
  double t = now_seconds();
  reduce_gradients();
  synchronize();
  report.reduce_s = now_seconds() - t;
  t = now_seconds();
  optimizer_step();
  synchronize();
  report.optimizer_s = now_seconds() - t;
  report.seconds = now_seconds() - start;
  report.comm_s = comms_.clocks->seconds();
  report.exposed_s = comms_.clocks->exposed();
  report.input_wait_s = comms_.clocks->pp.input_wait;
  return report;
}

}  // namespace sextant::model
