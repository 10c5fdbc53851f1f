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
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "kernels/model/data.h"
#include "kernels/model/gpt_layer.h"
#include "kernels/model/param_store.h"
#include "kernels/pipeline/executor.h"
#include "kernels/tensor_parallel/vocab.h"

namespace sextant::model {

class GptStages : public pp::StageCompute {
 public:
  // stages: the pipeline stages this rank runs (schedule.stages_of(pp rank)).
  // drop_residual: the planted fault stage_drops_residual.
  GptStages(const GptConfig& config, const ParallelConfig& parallel, std::vector<int> stages, ParamStore& store,
            const LayerEnv& env, bool drop_residual);

  Shape boundary_shape(int stage) const override;
  DType dtype() const override { return config_.dtype; }  // activations and their gradients
  Tensor forward(int stage, int microbatch, const Tensor& input) override;
  Tensor backward_input(int stage, int microbatch, const Tensor& grad_output) override;
  void backward_weight(int stage, int microbatch) override;
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

  GptConfig config_;
  ParallelConfig parallel_;
  std::vector<int> stages_;
  int stage_count_ = 1;
  int64_t layers_per_stage_ = 0;
  const tp::TpGroup* tp_;
  bool drop_residual_;
  Device device_;  // the store's: parameters, activations and gradients
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
