#include "suites/pipeline/mlp_stages.h"

#include <time.h>

#include <algorithm>

#include "harness/device.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/tensor_parallel/regions.h"

namespace sextant::pipeline {

namespace {

Tensor on_device(const Tensor& t, Device device) { return t.device() == device ? t : t.to(device); }

Tensor global_block(const MlpStagesConfig& c, const char* name, int global_microbatch, int64_t seq_offset,
                    int64_t seq_len) {
  const int64_t rows = c.total_microbatches * c.batch;
  return random_block({rows, c.seq, c.hidden}, {global_microbatch * c.batch, seq_offset, 0},
                      {c.batch, seq_len, c.hidden}, c.dtype, RandomSpec{c.seed, tensor_id(name), 1.0});
}

}  // namespace

tp::MlpWeights layer_weights(const MlpStagesConfig& c, int64_t layer, int tp_rank, int tp_size) {
  return tp::init_mlp_weights({c.hidden, c.ffn}, tp_rank, tp_size, c.dtype, c.seed, cat("pipeline.layer", layer),
                              c.device);
}

Tensor microbatch_input(const MlpStagesConfig& c, int global_microbatch, int64_t seq_offset, int64_t seq_len) {
  return global_block(c, "pipeline.x", global_microbatch, seq_offset, seq_len);
}

Tensor microbatch_target(const MlpStagesConfig& c, int global_microbatch, int64_t seq_offset, int64_t seq_len) {
  return global_block(c, "pipeline.target", global_microbatch, seq_offset, seq_len);
}

MlpStages::MlpStages(const MlpStagesConfig& config, const tp::TpGroup& g, const std::vector<int>& held)
    : config_(config), g_(g), held_(held) {
  if (config_.layers % config_.stages != 0)
    throw RuntimeError(cat("mlp stages: ", config_.stages, " stages do not divide ", config_.layers, " layers"));
  for (int s : held_) {
    auto [first, end] = layer_range(s);
    for (int64_t l = first; l < end; ++l) layers_.push_back(l);
  }
  std::sort(layers_.begin(), layers_.end());
  for (int64_t l : layers_) weights_.push_back(layer_weights(config_, l, g_.rank(), g_.size()));
  grads_.resize(layers_.size());
  const int64_t local = g_.local_seq(config_.seq), offset = g_.sp() ? local * g_.rank() : 0;
  const bool first = std::count(held_.begin(), held_.end(), 0) > 0;
  const bool last = std::count(held_.begin(), held_.end(), config_.stages - 1) > 0;
  for (int mb = 0; mb < config_.microbatches; ++mb) {
    const int global = config_.first_microbatch + mb;
    if (first) inputs_.push_back(on_device(microbatch_input(config_, global, offset, local), config_.device));
    if (last) targets_.push_back(microbatch_target(config_, global, offset, local));
  }
}

Shape MlpStages::boundary_shape(int) const { return {config_.batch, g_.local_seq(config_.seq), config_.hidden}; }

std::pair<int64_t, int64_t> MlpStages::layer_range(int stage) const {
  const int64_t per = config_.layers / config_.stages;
  return {stage * per, (stage + 1) * per};
}

size_t MlpStages::slot(int64_t layer) const {
  auto it = std::lower_bound(layers_.begin(), layers_.end(), layer);
  if (it == layers_.end() || *it != layer) throw RuntimeError(cat("mlp stages: layer ", layer, " is not held here"));
  return static_cast<size_t>(it - layers_.begin());
}

tp::MlpGrads& MlpStages::grads(int64_t layer) { return grads_[slot(layer)]; }

MlpStages::Stash& MlpStages::stash(int stage, int microbatch) {
  auto it = stash_.find({stage, microbatch});
  if (it == stash_.end())
    throw RuntimeError(cat("mlp stages: stage ", stage, " microbatch ", microbatch, " has no forward stashed"));
  return it->second;
}

// x: [b, s/tp | s, h] through the stage's blocks -> y: like x.
Tensor MlpStages::forward(int stage, int microbatch, const Tensor& input) {
  ScopedTimer timer(action_cpu_, TimerClock::process_cpu);
  const auto [first, end] = layer_range(stage);
  Stash st;
  st.saved.resize(static_cast<size_t>(end - first));
  Tensor x = stage == 0 ? inputs_.at(microbatch) : input;
  for (int64_t l = first; l < end; ++l) x = tp::mlp_forward(g_, weights_[slot(l)], x, st.saved[l - first]);
  const bool last = stage == config_.stages - 1;
  if (last) {  // this microbatch's share of the loss, over this rank's tokens
    // On the device y comes to the host: the loss is an f64 sum the check
    // compares, and its gradient (loss_gradient) is made from the same copy.
    if (!x.is_host()) x = x.to(Device::host);
    const Tensor& target = targets_.at(microbatch);
    double sum = 0;
    dispatch(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* y = x.data<T>();
      const T* t = target.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double d = to_double(y[i]) - to_double(t[i]);
        sum += d * d;
      }
    });
    loss_ += 0.5 * sum / (static_cast<double>(config_.total_microbatches) * config_.batch * config_.seq);
    st.y = x;
  }
  stash_[{stage, microbatch}] = std::move(st);
  peak_held_ = std::max(peak_held_, stash_.size());
  return last ? Tensor{} : x;
}

// d loss / d y = (y - target) / (M b s), in the activation dtype.
Tensor MlpStages::loss_gradient(int microbatch, const Tensor& y) const {
  const Tensor& target = targets_.at(microbatch);
  const double scale = 1.0 / (static_cast<double>(config_.total_microbatches) * config_.batch * config_.seq);
  Tensor dy = Tensor::empty(y.shape(), y.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = y.data<T>();
    const T* t = target.data<T>();
    T* d = dy.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) d[i] = from_double<T>((to_double(a[i]) - to_double(t[i])) * scale);
  });
  return on_device(dy, config_.device);
}

// I: dy -> dx through the stage's blocks in reverse, keeping what W needs.
Tensor MlpStages::backward_input(int stage, int microbatch, const Tensor& grad_output) {
  ScopedTimer timer(action_cpu_, TimerClock::process_cpu);
  Stash& st = stash(stage, microbatch);
  const auto [first, end] = layer_range(stage);
  Tensor dy = stage == config_.stages - 1 ? loss_gradient(microbatch, st.y) : grad_output;
  st.y = Tensor();
  st.pending.resize(st.saved.size());
  for (int64_t l = end - 1; l >= first; --l) {
    tp::MlpSaved& saved = st.saved[l - first];
    dy = tp::mlp_backward_input(g_, weights_[slot(l)], saved, dy, st.pending[l - first]);
    saved.ln = {};  // W reads only the linears' saved inputs
    saved.a = Tensor();
  }
  return stage == 0 ? Tensor{} : dy;
}

// W: the weight gradients of the stage's blocks, added to the step's sums.
void MlpStages::backward_weight(int stage, int microbatch) {
  ScopedTimer timer(action_cpu_, TimerClock::process_cpu);
  Stash& st = stash(stage, microbatch);
  const auto [first, end] = layer_range(stage);
  if (st.pending.size() != st.saved.size())
    throw RuntimeError(cat("mlp stages: W of stage ", stage, " microbatch ", microbatch, " before its I"));
  for (int64_t l = first; l < end; ++l) {
    tp::MlpGrads g;
    tp::mlp_backward_weight(g_, weights_[slot(l)], st.saved[l - first], st.pending[l - first], g);
    accumulate(l, microbatch, g);
  }
  stash_.erase({stage, microbatch});
}

// B: input and weight gradients together (the fused tp::mlp_backward).
Tensor MlpStages::backward(int stage, int microbatch, const Tensor& grad_output) {
  ScopedTimer timer(action_cpu_, TimerClock::process_cpu);
  Stash& st = stash(stage, microbatch);
  const auto [first, end] = layer_range(stage);
  Tensor dy = stage == config_.stages - 1 ? loss_gradient(microbatch, st.y) : grad_output;
  for (int64_t l = end - 1; l >= first; --l) {
    tp::MlpGrads g;
    dy = tp::mlp_backward(g_, weights_[slot(l)], st.saved[l - first], dy, g);
    accumulate(l, microbatch, g);
  }
  stash_.erase({stage, microbatch});
  return stage == 0 ? Tensor{} : dy;
}

void MlpStages::accumulate(int64_t layer, int microbatch, tp::MlpGrads& g) {
  tp::MlpGrads& sum = grads_[slot(layer)];
  tp::accumulate_grads(sum, g);
  if (config_.accumulate_twice && microbatch == 0) tp::accumulate_grads(sum, g);  // the planted bug
}

void MlpStages::synchronize() {
  if (config_.device != Device::host) cuda_synchronize();
}

void MlpStages::zero_grad() {
  for (tp::MlpGrads& g : grads_) tp::zero_grads(g);
  loss_ = 0;
  action_cpu_.clear();
  peak_held_ = stash_.size();
}

void MlpStages::reduce_grads(Communicator& dp) {
  for (tp::MlpGrads& g : grads_) {
    tp::reduce_sequence_parallel_grads(g_, g.replicated_over_tp());
    tp::all_reduce_grads(dp, g.all());
  }
}

}  // namespace sextant::pipeline
