#include "kernels/pipeline/testing/linear_stages.h"

#include <algorithm>
#include <cmath>

#include "harness/rng.h"
#include "harness/strings.h"
#include "kernels/ops/gemm.h"

namespace sextant::pp {

namespace {

RandomSpec spec(const LinearStagesConfig& c, const std::string& name, double scale) {
  return RandomSpec{c.seed, tensor_id(name), scale};
}

// Elementwise loops in the tensor's own precision (f32 or f64).
template <class Fn>
void with_type(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) return fn(float{});
  if (dtype == DType::f64) return fn(double{});
  throw UsageError(cat("pipeline linear stages: dtype ", dtype_name(dtype), " must be f32 or f64"));
}

}  // namespace

Tensor LinearStages::make_weight(const LinearStagesConfig& c, int stage) {
  // uniform(-a, a) with a = sqrt(3 / hidden): variance 1/hidden keeps x W at unit scale.
  return random_tensor({c.hidden, c.hidden}, c.dtype,
                       spec(c, cat("pipeline.linear.w", stage), std::sqrt(3.0 / c.hidden)));
}

Tensor LinearStages::make_input(const LinearStagesConfig& c, int microbatch) {
  const int64_t m = c.microbatches, rows = c.rows, h = c.hidden;
  return random_block({m * rows, h}, {microbatch * rows, 0}, {rows, h}, c.dtype, spec(c, "pipeline.linear.x", 1.0));
}

Tensor LinearStages::make_target(const LinearStagesConfig& c, int microbatch) {
  const int64_t m = c.microbatches, rows = c.rows, h = c.hidden;
  return random_block({m * rows, h}, {microbatch * rows, 0}, {rows, h}, c.dtype, spec(c, "pipeline.linear.t", 0.5));
}

LinearStages::LinearStages(const LinearStagesConfig& config, const std::vector<int>& held)
    : config_(config), held_(held) {
  with_type(config.dtype, [](auto) {});
  for (int s : held_) {
    weights_.push_back(make_weight(config_, s));
    grads_.push_back(Tensor::zeros({config_.hidden, config_.hidden}, config_.dtype));
  }
  const bool first = std::count(held_.begin(), held_.end(), 0) > 0;
  const bool last = std::count(held_.begin(), held_.end(), config_.stages - 1) > 0;
  for (int mb = 0; mb < config_.microbatches; ++mb) {
    if (first) inputs_.push_back(make_input(config_, mb));
    if (last) targets_.push_back(make_target(config_, mb));
  }
}

size_t LinearStages::slot(int stage) const {
  auto it = std::find(held_.begin(), held_.end(), stage);
  if (it == held_.end()) throw RuntimeError(cat("linear stages: stage ", stage, " is not held here"));
  return static_cast<size_t>(it - held_.begin());
}

const Tensor& LinearStages::weight(int stage) const { return weights_[slot(stage)]; }
const Tensor& LinearStages::weight_grad(int stage) const { return grads_[slot(stage)]; }

void LinearStages::zero_grad() {
  for (Tensor& g : grads_) g.zero();
  loss_ = 0;
}

LinearStages::Stash& LinearStages::stash(int stage, int microbatch) {
  auto it = stash_.find({stage, microbatch});
  if (it == stash_.end())
    throw RuntimeError(cat("linear stages: stage ", stage, " microbatch ", microbatch, " has no forward stashed"));
  return it->second;
}

Tensor LinearStages::forward(int stage, int microbatch, const Tensor& input) {
  // x: [rows, hidden] -> y = tanh(x W): [rows, hidden]
  Tensor x = stage == 0 ? inputs_.at(microbatch) : input;
  Tensor y = Tensor::empty(x.shape(), config_.dtype);
  ops::gemm(x, false, weights_[slot(stage)], false, y);
  with_type(config_.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* v = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) v[i] = std::tanh(v[i]);
  });
  stash_[{stage, microbatch}] = Stash{x, y, Tensor{}};
  if (stage != config_.stages - 1) return y;
  // Last stage: this microbatch's share of the loss.
  const Tensor& target = targets_.at(microbatch);
  double sum = 0;
  with_type(config_.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* a = y.data<T>();
    const T* t = target.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double d = static_cast<double>(a[i]) - t[i];
      sum += d * d;
    }
  });
  loss_ += 0.5 * sum / (static_cast<double>(config_.microbatches) * config_.rows);
  return Tensor{};
}

Tensor LinearStages::backward_input(int stage, int microbatch, const Tensor& grad_output) {
  // dy: [rows, hidden] -> dz = dy (1 - y^2), dx = dz W^T: [rows, hidden]
  Stash& st = stash(stage, microbatch);
  const bool last = stage == config_.stages - 1;
  const Tensor target = last ? targets_.at(microbatch) : Tensor{};
  const double scale = 1.0 / (static_cast<double>(config_.microbatches) * config_.rows);
  st.dz = Tensor::empty(st.y.shape(), config_.dtype);
  with_type(config_.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* y = st.y.data<T>();
    const T* dy = last ? nullptr : grad_output.data<T>();
    const T* t = last ? target.data<T>() : nullptr;
    T* dz = st.dz.data<T>();
    for (int64_t i = 0; i < st.dz.numel(); ++i) {
      const T g = last ? static_cast<T>((y[i] - t[i]) * scale) : dy[i];
      dz[i] = g * (T(1) - y[i] * y[i]);
    }
  });
  st.y = Tensor{};  // no longer needed
  if (stage == 0) return Tensor{};
  Tensor dx = Tensor::empty(st.x.shape(), config_.dtype);
  ops::gemm(st.dz, false, weights_[slot(stage)], true, dx);
  return dx;
}

void LinearStages::backward_weight(int stage, int microbatch) {
  // dW += x^T dz: [hidden, hidden]
  Stash& st = stash(stage, microbatch);
  Tensor& grad = grads_[slot(stage)];
  ops::gemm(st.x, true, st.dz, false, grad, 1.0f, 1.0f);
  if (config_.accumulate_twice && microbatch == 0) ops::gemm(st.x, true, st.dz, false, grad, 1.0f, 1.0f);
  stash_.erase({stage, microbatch});
}

}  // namespace sextant::pp
