#include "kernels/model/gpt_stages.h"

#include <algorithm>

#include "harness/device.h"
#include "harness/error.h"
#include "harness/memory_use.h"
#include "harness/strings.h"
#include "kernels/model/split_linear.h"

namespace sextant::model {

namespace {
std::vector<Param*> expert_blocks(ParamStore& store, const std::string& name) {
  std::vector<Param*> out;
  for (Param& p : store.params())
    if (p.spec->name == name) out.push_back(&p);
  std::sort(out.begin(), out.end(),
            [](const Param* a, const Param* b) { return a->block.local_expert < b->block.local_expert; });
  return out;
}
// [1, a, b] expert block -> [a, b] matrix (same storage).
Tensor matrix(const Tensor& block) { return block.reshape({block.dim(1), block.dim(2)}); }
}  // namespace

LayerWeights layer_weights(ParamStore& store, const GptConfig& c, int layer, int tp_size) {
  const std::string n = cat("layers.", layer, ".");
  auto v = [&](const char* name) { return store.get(n + name).compute; };
  LayerWeights w;
  w.attn.ln_gamma = v("ln1_gamma"), w.attn.ln_beta = v("ln1_beta");
  w.attn.qkv.w = v("wqkv"), w.attn.qkv.b = v("bqkv");
  w.attn.out.w = v("wo"), w.attn.out.b = v("bo");
  w.attn.local_heads = c.heads / tp_size;
  w.attn.local_kv_heads = c.kv_heads / tp_size;
  w.attn.head_dim = c.head_dim;
  w.attn.v_head_dim = c.v_head_dim;
  w.ln2_gamma = v("ln2_gamma"), w.ln2_beta = v("ln2_beta");
  if (!c.moe[layer]) {
    w.fc1.w = v("w1"), w.fc1.b = v("b1");
    w.fc2.w = v("w2"), w.fc2.b = v("b2");
    return w;
  }
  w.moe.router = v("router");
  for (Param* p : expert_blocks(store, n + "expert_w1")) w.moe.w1.push_back(matrix(p->compute));
  for (Param* p : expert_blocks(store, n + "expert_w2")) w.moe.w2.push_back(matrix(p->compute));
  return w;
}

LayerGrads layer_grads(ParamStore& store, const GptConfig& c, int layer) {
  const std::string n = cat("layers.", layer, ".");
  auto g = [&](const char* name) { return store.get(n + name).grad; };
  LayerGrads d;
  d.ln1_gamma = g("ln1_gamma"), d.ln1_beta = g("ln1_beta"), d.wqkv = g("wqkv"), d.bqkv = g("bqkv");
  d.wo = g("wo"), d.bo = g("bo"), d.ln2_gamma = g("ln2_gamma"), d.ln2_beta = g("ln2_beta");
  if (!c.moe[layer]) {
    d.w1 = g("w1"), d.b1 = g("b1"), d.w2 = g("w2"), d.b2 = g("b2");
    return d;
  }
  d.router = g("router");
  for (Param* p : expert_blocks(store, n + "expert_w1")) d.expert_w1.push_back(matrix(p->grad));
  for (Param* p : expert_blocks(store, n + "expert_w2")) d.expert_w2.push_back(matrix(p->grad));
  return d;
}

GptStages::GptStages(const GptConfig& config, const ParallelConfig& parallel, std::vector<int> stages,
                     ParamStore& store, const LayerEnv& env, Faults faults)
    : config_(config),
      parallel_(parallel),
      stages_(std::move(stages)),
      stage_count_(parallel.pp * parallel.vpp),
      layers_per_stage_(layers_per_stage(config, parallel)),
      tp_(env.tp),
      faults_(faults),
      device_(store.device()) {
  std::sort(stages_.begin(), stages_.end());
  for (int stage : stages_)
    for (int64_t l = stage * layers_per_stage_; l < (stage + 1) * layers_per_stage_; ++l) {
      const int i = static_cast<int>(l);
      layers_.push_back(std::make_unique<GptLayer>(i, config.moe[i], env, layer_weights(store, config, i, tp_->size()),
                                                   layer_grads(store, config, i)));
    }
  const int64_t vocab_start = tp_->rank() * (config.vocab / tp_->size());
  if (store.holds("embedding")) {
    embedding_ = {store.get("embedding").compute, vocab_start};
    d_embedding_ = store.get("embedding").grad;
  }
  if (store.holds("head")) {
    lnf_gamma_ = store.get("lnf_gamma").compute, lnf_beta_ = store.get("lnf_beta").compute;
    d_lnf_gamma_ = store.get("lnf_gamma").grad, d_lnf_beta_ = store.get("lnf_beta").grad;
    head_.w = store.get("head").compute;
    d_head_ = store.get("head").grad;
  }
  saved_.resize(static_cast<size_t>(config.microbatches));
}

Shape GptStages::boundary_shape(int) const {
  const int64_t b = config_.batch / (static_cast<int64_t>(parallel_.dp) * config_.microbatches);
  const int64_t rows = config_.seq / parallel_.cp;
  return {b, tp_->sp() ? rows / tp_->size() : rows, config_.hidden};
}

void GptStages::begin_step(std::vector<MicrobatchData> data, double loss_scale) {
  data_ = std::move(data);
  loss_scale_ = loss_scale;
  loss_ = 0;
  weight_grads_done_.assign(static_cast<size_t>(unit_count(config_.layers)), 0);
}

std::vector<GptLayer*> GptStages::layers_of(int stage) const {
  std::vector<GptLayer*> out;
  for (const auto& l : layers_)
    if (l->index() / layers_per_stage_ == stage) out.push_back(l.get());
  if (out.empty()) throw RuntimeError(cat("GptStages: stage ", stage, " is not held by this rank"));
  return out;
}

// What a forward allocates is counted as activations (what it keeps for the
// backward and its temporaries alike); a backward's allocations are workspace.
Tensor GptStages::forward(int stage, int mb, const Tensor& input) {
  MemoryScope scope(MemoryKind::activations);
  Tensor x = stage == 0 ? first_stage_input(mb) : input;
  bool boundary = stage > 0;  // the first layer after a stage boundary
  for (GptLayer* layer : layers_of(stage)) {
    before_forward(layer->index() + 1);
    x = layer->forward(mb, x, faults_.drop_residual && boundary);
    boundary = false;
    progress();
  }
  if (stage != stage_count_ - 1) return x;
  last_stage_loss(mb, x);
  return Tensor{};
}

Tensor GptStages::backward_input(int stage, int mb, const Tensor& grad_output) {
  MemoryScope scope(MemoryKind::workspace);
  Tensor dx = stage == stage_count_ - 1 ? last_stage_backward(mb) : grad_output;
  const std::vector<GptLayer*> layers = layers_of(stage);
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    dx = (*it)->backward_input(mb, dx);
    progress();
  }
  if (stage != 0) return dx;
  saved_.at(static_cast<size_t>(mb)).d_embedding = dx;
  return Tensor{};
}

void GptStages::backward_weight(int stage, int mb) {
  MemoryScope scope(MemoryKind::workspace);
  for (GptLayer* layer : layers_of(stage)) unit_weight_grads(layer->index() + 1, [&] { layer->backward_weight(mb); });
  if (stage == stage_count_ - 1) head_weight_grads(mb);
  if (stage == 0) embedding_weight_grads(mb);
}

Tensor GptStages::backward(int stage, int mb, const Tensor& grad_output) {
  MemoryScope scope(MemoryKind::workspace);
  Tensor dx = grad_output;
  if (stage == stage_count_ - 1) {
    dx = last_stage_backward(mb);
    head_weight_grads(mb);
  }
  const std::vector<GptLayer*> layers = layers_of(stage);
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    GptLayer* layer = *it;
    dx = layer->backward_input(mb, dx);
    unit_weight_grads(layer->index() + 1, [&] { layer->backward_weight(mb); });
  }
  if (stage != 0) return dx;
  saved_.at(static_cast<size_t>(mb)).d_embedding = dx;
  embedding_weight_grads(mb);
  return Tensor{};
}

void GptStages::unit_weight_grads(int unit, const std::function<void()>& compute) {
  const bool last = ++weight_grads_done_.at(static_cast<size_t>(unit)) == config_.microbatches;
  if (last && hooks_ && faults_.early_gradients_final) hooks_->gradients_final(unit);
  compute();
  if (last && hooks_ && !faults_.early_gradients_final) hooks_->gradients_final(unit);
  progress();
}

void GptStages::head_weight_grads(int mb) {
  unit_weight_grads(head_unit(), [&] {
    HeadSaved& s = saved_.at(static_cast<size_t>(mb));
    column_backward_weight(*tp_, head_, s.head, s.d_logits, d_head_, nullptr);
    s.lnf = {}, s.head = {}, s.ce = {}, s.d_logits = Tensor{};
  });
}

void GptStages::embedding_weight_grads(int mb) {
  unit_weight_grads(0, [&] {
    HeadSaved& s = saved_.at(static_cast<size_t>(mb));
    Tensor dtable;  // [V/tp, h]: the rows of this slice, summed over the tokens that looked them up
    tp::embedding_backward(*tp_, embedding_, s.embedding, s.d_embedding, dtable);
    accumulate(d_embedding_, dtable);
    s.embedding = {}, s.d_embedding = Tensor{};
  });
}

void GptStages::synchronize() {
  if (device_ != Device::host) cuda_synchronize();
}

Tensor GptStages::first_stage_input(int mb) {
  before_forward(0);
  const MicrobatchData& d = data_.at(static_cast<size_t>(mb));
  return tp::embedding_forward(*tp_, embedding_, d.ids, d.batch, d.rows, saved_.at(static_cast<size_t>(mb)).embedding);
}

void GptStages::last_stage_loss(int mb, const Tensor& x) {
  before_forward(head_unit());
  const MicrobatchData& d = data_.at(static_cast<size_t>(mb));
  HeadSaved& s = saved_.at(static_cast<size_t>(mb));
  const Tensor xf = tp::layernorm_forward(*tp_, x, lnf_gamma_, lnf_beta_, s.lnf);  // [b, s/tp | s, h]
  const Tensor logits = tp::column_parallel_forward(*tp_, head_, xf, s.head);      // [b, s, V/tp]
  const int64_t vocab_start = tp_->rank() * (config_.vocab / tp_->size());
  Tensor losses = tp::vocab_parallel_cross_entropy_forward(*tp_, logits, d.targets, vocab_start, s.ce);
  if (!losses.is_host()) losses = losses.to(Device::host);  // the f64 sum is the host's, in the same order
  if (losses.dtype() != DType::f32) losses = losses.to(DType::f32);
  const float* l = losses.data<float>();
  double sum = 0;
  for (int64_t i = 0, n = losses.numel(); i < n; ++i) sum += l[i];
  loss_ += loss_scale_ * sum;
}

Tensor GptStages::last_stage_backward(int mb) {
  HeadSaved& s = saved_.at(static_cast<size_t>(mb));
  s.d_logits = tp::vocab_parallel_cross_entropy_backward(*tp_, s.ce, static_cast<float>(loss_scale_));
  const Tensor dxf = column_backward_input(*tp_, head_, s.d_logits);  // [b, s/tp | s, h]
  Tensor dg, db;
  Tensor dx = tp::layernorm_backward(*tp_, s.lnf, lnf_gamma_, dxf, dg, db);
  accumulate(d_lnf_gamma_, dg);
  accumulate(d_lnf_beta_, db);
  return dx;
}

}  // namespace sextant::model
