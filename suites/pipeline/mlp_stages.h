// The pipeline suite's stages: each stage runs layers_per_stage pre-LN MLP
// blocks of kernels/tensor_parallel (TP + SP inside the stage), and the last
// stage adds the microbatch's share of the loss
//   loss = sum_mb sum_tokens 0.5 ||y - target||^2 / (M b s)
// (M microbatches of [b, s, h] in the global batch). Weight gradients are
// summed over the microbatches of a step in f32 main grads (f64 for f64);
// I and W are the real zero-bubble split (tp::mlp_backward_input /
// tp::mlp_backward_weight), B the fused tp::mlp_backward.
//
// Microbatch mb of DP replica d is global microbatch d * m + mb: rows
// [(d m + mb) b, (d m + mb + 1) b) of the global input X and target
// [M b, s, h] (deterministic, harness/rng.h). Layer l's weights are
// tp::init_mlp_weights(prefix "pipeline.layer<l>").
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "kernels/pipeline/executor.h"
#include "kernels/tensor_parallel/mlp.h"

namespace sextant::pipeline {

struct MlpStagesConfig {
  int64_t layers = 1;  // in the whole model
  int stages = 1;      // layers / stages blocks per stage
  int64_t hidden = 0, ffn = 0, batch = 1, seq = 1;
  int microbatches = 1;        // this pipeline's m
  int total_microbatches = 1;  // M over all DP replicas (loss normalization)
  int first_microbatch = 0;    // global index of this pipeline's microbatch 0
  DType dtype = DType::f32;
  Device device = Device::host;  // of weights, activations and gradients
  uint64_t seed = 0;
  bool accumulate_twice = false;  // planted: W of microbatch 0 adds its gradients twice
};

// The deterministic tensors the reference shares: layer l's full weights (on
// c.device), and global microbatch g's input and target [b, s, h] (host).
tp::MlpWeights layer_weights(const MlpStagesConfig& c, int64_t layer, int tp_rank, int tp_size);
Tensor microbatch_input(const MlpStagesConfig& c, int global_microbatch, int64_t seq_offset, int64_t seq_len);
Tensor microbatch_target(const MlpStagesConfig& c, int global_microbatch, int64_t seq_offset, int64_t seq_len);

class MlpStages : public pp::StageCompute {
 public:
  // Holds `held` stages (those placed on this rank) on TP group g.
  MlpStages(const MlpStagesConfig& config, const tp::TpGroup& g, const std::vector<int>& held);

  // [b, s/tp, h] under SP, [b, s, h] otherwise.
  Shape boundary_shape(int stage) const override;
  DType dtype() const override { return config_.dtype; }
  Tensor forward(int stage, int microbatch, const Tensor& input) override;
  Tensor backward_input(int stage, int microbatch, const Tensor& grad_output) override;
  void backward_weight(int stage, int microbatch) override;
  Tensor backward(int stage, int microbatch, const Tensor& grad_output) override;
  // On the device: waits for the GPU, so that the executor's action end times
  // (and the CPU-time log) include the action's kernels.
  void synchronize() override;

  // The start of a step: gradients and loss to zero, CPU-time log cleared.
  void zero_grad();
  // The end of a step: SP's replicated-parameter gradients summed over TP,
  // then every gradient summed over DP (dp may be a group of one).
  void reduce_grads(Communicator& dp);

  double loss() const { return loss_; }                           // this rank's microbatches and tokens
  const std::vector<int64_t>& layers() const { return layers_; }  // held, ascending
  tp::MlpGrads& grads(int64_t layer);
  // Microbatches whose activations are held now, and the most held at once
  // in this step, in chunk-microbatches (F done, W or B not yet).
  size_t held_activations() const { return stash_.size(); }
  size_t peak_held_activations() const { return peak_held_; }
  // Process CPU seconds of each action this step, in call order.
  const std::vector<double>& action_cpu_seconds() const { return action_cpu_; }

 private:
  struct Stash {
    std::vector<tp::MlpSaved> saved;           // per layer of the stage
    std::vector<tp::MlpPendingGrads> pending;  // per layer, between I and W
    Tensor y;                                  // the last stage's output (the loss gradient)
  };
  std::pair<int64_t, int64_t> layer_range(int stage) const;  // [first, end)
  size_t slot(int64_t layer) const;
  Stash& stash(int stage, int microbatch);
  Tensor loss_gradient(int microbatch, const Tensor& y) const;
  void accumulate(int64_t layer, int microbatch, tp::MlpGrads& g);

  MlpStagesConfig config_;
  tp::TpGroup g_;
  std::vector<int> held_;
  std::vector<int64_t> layers_;
  std::vector<tp::MlpWeights> weights_;  // per held layer
  std::vector<tp::MlpGrads> grads_;      // per held layer, summed over the step
  // Made up front so that the first and the last stage cost what the others do.
  // Inputs on config.device; targets on the host, where the loss is summed.
  std::vector<Tensor> inputs_, targets_;  // per microbatch, where stage 0 / the last stage is held
  std::map<std::pair<int, int>, Stash> stash_;
  size_t peak_held_ = 0;
  std::vector<double> action_cpu_;
  double loss_ = 0;
};

}  // namespace sextant::pipeline
