#include "kernels/model/trainer.h"

#include <algorithm>

#include "harness/device.h"
#include "harness/error.h"
#include "harness/memory_use.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/pipeline/schedules.h"

namespace sextant::model {

// Device work is asynchronous (one compute stream; NCCL enqueues too): host
// clocks read after it finished.
void GptTrainer::synchronize() const {
  if (comms_.device != Device::host) cuda_synchronize();
}

GptTrainer::GptTrainer(const GptConfig& config, ModelComms& comms, uint64_t seed, Fault fault)
    : config_(config), comms_(comms), seed_(seed), fault_(fault), tokens_(token_source(config, seed)) {
  const ParallelConfig& p = comms.parallel;
  validate(config_, p);
  tp_ = std::make_unique<tp::TpGroup>(tp::TpGroup{*comms.tp, p.sp, config.regather});
  // FP8 amaxes: after TP, over the ranks that split the tokens of one weight shard.
  if (config.fp8 && fault_ != Fault::fp8_amax_not_reduced_over_dp) tp_->amax_dp = comms.dp_cp.get();
  pp::Schedule schedule = pp::make_schedule(config.schedule, p.pp, config.microbatches, p.vpp);
  const std::vector<int> stages = schedule.stages_of(comms.pp->rank());
  std::vector<int> layers;
  const int64_t per_stage = layers_per_stage(config, p);
  for (int s : stages)
    for (int64_t l = s * per_stage; l < (s + 1) * per_stage; ++l) layers.push_back(static_cast<int>(l));
  const bool first = std::count(stages.begin(), stages.end(), 0) > 0;
  const bool last = std::count(stages.begin(), stages.end(), schedule.stages - 1) > 0;
  store_ = std::make_unique<ParamStore>(config, p, comms.coords, layers, first, last, comms.device);
  const GptStages::Faults stage_faults{fault_ == Fault::stage_drops_residual, fault_ == Fault::early_grad_bucket};
  stages_ = std::make_unique<GptStages>(config, p, stages, *store_, layer_env(), stage_faults);
  pp::ExecutorOptions options;
  options.host = comms.host_pp.get();
  executor_ = std::make_unique<pp::PipelineExecutor>(std::move(schedule), *comms.pp, *stages_, options);
  const dp::OptimizerFaults faults{fault_ == Fault::no_cp_grad_reduce, fault_ == Fault::experts_over_dp,
                                   fault_ == Fault::no_sp_layernorm_reduce, fault_ == Fault::unwaited_param_gather};
  const dp::OptimizerComms oc{comms.tp.get(), p.sp, comms.dp.get(), comms.dp_cp.get(), comms.edp.get()};
  const dp::OptimizerConfig optimizer{config.adam,
                                      config.distributed_optimizer,
                                      {config.overlap_grad_reduce, config.overlap_param_gather},
                                      config.bucket_mb};
  optimizer_ = std::make_unique<dp::Optimizer>(store_->trained_set(), oc, optimizer, faults);
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
  env.cp_options.window = ops::Window::causal(config_.window);
  const cp::VariantInfo& variant = cp::variant_info(config_.cp_comm);
  env.cp_options.kv_exchange = variant.kv.value_or(cp::KvExchange::ring);
  env.cp_options.attention_impl = config_.attention_impl;
  if (p.cp > 1) {
    if (variant.split()) env.cp = {comms_.cp_a2a.get(), comms_.cp_ring.get()};
    else if (variant.a2a) env.cp.a2a = comms_.cp.get();
    else env.cp.kv = comms_.cp.get();
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
  env.recompute = config_.recompute;
  env.recompute_wrong_input = fault_ == Fault::recompute_wrong_input;
  env.progress = [this] { optimizer_->progress(); };  // (the optimizer exists before any step runs)
  return env;
}

void GptTrainer::reset() {
  optimizer_->reset();  // first: pending parameter gathers complete before the weights are drawn again
  store_->initialize(seed_);
  if (config_.fp8)  // fresh FP8 state: delayed scaling's history starts empty again
    for (const auto& layer : stages_->layers()) layer->use_fp8_linears(*config_.fp8);
  data_step_ = 0;
}

// Outside the stages' own scopes (forward: activations) the step's
// temporaries count as workspace (harness/memory_use.h).
void GptTrainer::forward_backward(StepReport& report) {
  MemoryScope scope(MemoryKind::workspace);
  const ParallelConfig& p = comms_.parallel;
  std::vector<MicrobatchData> data;
  for (int mb = 0; mb < config_.microbatches; ++mb)
    data.push_back(microbatch_data(config_, p, comms_.coords, tokens_, data_step_, mb));
  // The loss is the mean over every prediction of the global batch (padding
  // positions predict nothing). The planted faults average over this rank's
  // own positions, or over every position, padding included.
  double tokens = static_cast<double>(config_.predictions_per_step());
  if (fault_ == Fault::loss_token_count) tokens = static_cast<double>(config_.batch / p.dp) * (config_.seq / p.cp);
  if (fault_ == Fault::padding_in_loss) tokens = static_cast<double>(config_.tokens_per_step());
  stages_->begin_step(std::move(data), 1.0 / tokens);
  store_->zero_grads();
  optimizer_->begin_backward();
  synchronize();
  const double start = now_seconds();
  report.actions = executor_->run_step();
  // Every forward waited for its parameters (a no-op), unless the planted
  // fault skipped those waits: then the new parameters land only now.
  optimizer_->finish_param_gathers();
  for (const auto& layer : stages_->layers()) layer->end_fp8_step();
  synchronize();
  report.pipeline_s = now_seconds() - start;
  // One TP rank of each last-stage replica reports its tokens' share.
  const bool reports = store_->holds("head") && comms_.tp->rank() == 0;
  report.loss = comms_.world->all_reduce_value(reports ? stages_->loss() : 0.0, ReduceOp::sum);
  ++data_step_;
}

void GptTrainer::reduce_gradients() {
  MemoryScope scope(MemoryKind::workspace);
  optimizer_->reduce_gradients();
}
void GptTrainer::gather_gradients() { optimizer_->gather_gradients(); }  // checks only: not counted
void GptTrainer::optimizer_step() {
  MemoryScope scope(MemoryKind::workspace);
  optimizer_->step();  // (it refreshes the bf16 copies of what it writes)
}

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
