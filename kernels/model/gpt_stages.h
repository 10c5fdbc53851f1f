// The GPT's pipeline stages on one rank, as kernels/pipeline runs them
// (a StageCompute): stage s holds layers [s L/S, (s+1) L/S) of S = pp * vpp
// stages; the first stage also embeds the tokens, the last one ends with the
// final LayerNorm, the vocab-parallel LM head and cross-entropy:
//
//   x0     = E[ids]                          [b, s/tp | s, h]      vocab-parallel embedding
//   x      = layers(x0)                      [b, s/tp | s, h]      (s = seq/cp rows)
//   logits = LNf(x) Whead                    [b, s, V/tp]          column-parallel, kept split
//   loss  += scale * sum_t CE(logits_t, target_t)                  vocab-parallel
//
// `scale` is 1 / (B * seq): the mean over every next-token prediction of
// the global batch, whichever rank holds the token.
//
// The full backward B runs each layer's I and then its W, last layer first
// (as autograd does), so a layer's weight gradients are final as early as
// possible; schedules that split I and W call them apart. Hooks (optional,
// unit_hooks.h) hear when a unit's parameters are read, when its weight
// gradients are final (its W of the last microbatch of the step) and every
// layer boundary.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "kernels/data_parallel/unit_hooks.h"
#include "kernels/model/data.h"
#include "kernels/model/gpt_layer.h"
#include "kernels/model/param_store.h"
#include "kernels/pipeline/executor.h"
#include "kernels/tensor_parallel/vocab.h"

namespace sextant::model {

class GptStages : public pp::StageCompute {
 public:
  // Planted faults (step_faults.h).
  struct Faults {
    bool drop_residual = false;          // stage_drops_residual
    bool early_gradients_final = false;  // early_grad_bucket: "final" announced before the last W
  };
  // stages: the pipeline stages this rank runs (schedule.stages_of(pp rank)).
  GptStages(const GptConfig& config, const ParallelConfig& parallel, std::vector<int> stages, ParamStore& store,
            const LayerEnv& env, Faults faults);
  void set_hooks(dp::UnitHooks* hooks) { hooks_ = hooks; }

  Shape boundary_shape(int stage) const override;
  DType dtype() const override { return config_.dtype; }  // activations and their gradients
  Tensor forward(int stage, int microbatch, const Tensor& input) override;
  Tensor backward_input(int stage, int microbatch, const Tensor& grad_output) override;
  void backward_weight(int stage, int microbatch) override;
  Tensor backward(int stage, int microbatch, const Tensor& grad_output) override;
  // On a device: waits for the compute stream, so that host clocks read finished work.
  void synchronize() override;

  // The step's data (one entry per microbatch) and the loss scale.
  void begin_step(std::vector<MicrobatchData> data, double loss_scale);
  // Sum over the microbatches run on the last stage of scale * token losses
  // (every TP rank holds the same value).
  double loss() const { return loss_; }
  const std::vector<std::unique_ptr<GptLayer>>& layers() const { return layers_; }
  const MicrobatchData& data(int microbatch) const { return data_.at(static_cast<size_t>(microbatch)); }
  int stage_count() const { return stage_count_; }

 private:
  struct HeadSaved {
    tp::EmbeddingSaved embedding;
    Tensor d_embedding;  // kept from I for W (the first stage)
    tp::LayerNormSaved lnf;
    tp::ColumnSaved head;
    tp::CrossEntropySaved ce;
    Tensor d_logits;  // kept from I for W (the last stage)
  };
  std::vector<GptLayer*> layers_of(int stage) const;
  Tensor first_stage_input(int microbatch);
  void last_stage_loss(int microbatch, const Tensor& x);
  Tensor last_stage_backward(int microbatch);
  // W of one unit for a microbatch, announcing the unit final after its last microbatch.
  void unit_weight_grads(int unit, const std::function<void()>& compute);
  void head_weight_grads(int microbatch);
  void embedding_weight_grads(int microbatch);
  void before_forward(int unit) {
    if (hooks_) hooks_->before_forward(unit);
  }
  void progress() {
    if (hooks_) hooks_->progress();
  }
  int head_unit() const { return static_cast<int>(config_.layers) + 1; }

  GptConfig config_;
  ParallelConfig parallel_;
  std::vector<int> stages_;
  int stage_count_ = 1;
  int64_t layers_per_stage_ = 0;
  const tp::TpGroup* tp_;
  Faults faults_;
  dp::UnitHooks* hooks_ = nullptr;
  std::vector<int> weight_grads_done_;             // per unit: microbatches whose W ran this step
  Device device_;                                  // the store's: parameters, activations and gradients
  std::vector<std::unique_ptr<GptLayer>> layers_;  // the layers of this rank's stages, ascending
  // First / last stage parameters (views of the store), when held.
  tp::VocabParallelEmbedding embedding_;
  Tensor d_embedding_;
  Tensor lnf_gamma_, lnf_beta_, d_lnf_gamma_, d_lnf_beta_;
  tp::ColumnParallelLinear head_;
  Tensor d_head_;
  std::vector<HeadSaved> saved_;  // per microbatch
  std::vector<MicrobatchData> data_;
  double loss_scale_ = 0, loss_ = 0;
};

// Builds one layer's weight views (the store's compute tensors) and gradient views from the store.
LayerWeights layer_weights(ParamStore& store, const GptConfig& config, int layer, int tp_size);
LayerGrads layer_grads(ParamStore& store, const GptConfig& config, int layer);

}  // namespace sextant::model
