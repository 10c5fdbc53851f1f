// A small model for testing the executor: `stages` stages, stage s computes
//   y = tanh(x W_s)          x: [rows, hidden], W_s: [hidden, hidden]
// on microbatch inputs X_mb: [rows, hidden] (rows mb*rows.. of one global
// [m*rows, hidden] input), and the last stage adds the microbatch's share of
//   loss = sum_mb 0.5 * ||y_mb - target_mb||^2 / (m * rows).
// Backward split as zero bubble needs it:
//   I: dz = dy * (1 - y^2); dx = dz W_s^T      (keeps x and dz for W)
//   W: dW_s += x^T dz
// Host f32 or f64; matrix products through ops::gemm.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "kernels/pipeline/executor.h"

namespace sextant::pp {

struct LinearStagesConfig {
  int stages = 1;
  int microbatches = 1;
  int rows = 4;
  int hidden = 8;
  DType dtype = DType::f32;
  uint64_t seed = 0;
  // Planted fault: W of microbatch 0 adds its gradient twice.
  bool accumulate_twice = false;
};

class LinearStages : public StageCompute {
 public:
  // Holds `held` stages (those the schedule places on this rank).
  LinearStages(const LinearStagesConfig& config, const std::vector<int>& held);

  Shape boundary_shape(int) const override { return {config_.rows, config_.hidden}; }
  DType dtype() const override { return config_.dtype; }
  Tensor forward(int stage, int microbatch, const Tensor& input) override;
  Tensor backward_input(int stage, int microbatch, const Tensor& grad_output) override;
  void backward_weight(int stage, int microbatch) override;

  double loss() const { return loss_; }  // sum over the microbatches run on the last stage
  const Tensor& weight(int stage) const;
  const Tensor& weight_grad(int stage) const;
  void zero_grad();  // gradients and loss
  // Microbatches whose activations are held now (F done, W not yet).
  size_t held_activations() const { return stash_.size(); }

  // The deterministic inputs, shared with references: W_s, X_mb, target_mb.
  static Tensor make_weight(const LinearStagesConfig& config, int stage);
  static Tensor make_input(const LinearStagesConfig& config, int microbatch);
  static Tensor make_target(const LinearStagesConfig& config, int microbatch);

 private:
  struct Stash {
    Tensor x, y, dz;  // input, output, gradient before tanh
  };
  Stash& stash(int stage, int microbatch);
  size_t slot(int stage) const;

  LinearStagesConfig config_;
  std::vector<int> held_;
  std::vector<Tensor> weights_, grads_;
  // Made up front so that the first and last stage cost what the others do.
  std::vector<Tensor> inputs_, targets_;  // per microbatch, where stage 0 / the last stage is held
  std::map<std::pair<int, int>, Stash> stash_;
  double loss_ = 0;
};

}  // namespace sextant::pp
