#include "kernels/model/param_store.h"

#include <algorithm>

#include "harness/device.h"
#include "harness/error.h"
#include "harness/memory_use.h"
#include "harness/strings.h"

namespace sextant::model {

ParamStore::ParamStore(const GptConfig& config, const ParallelConfig& parallel, const RankCoords& coords,
                       const std::vector<int>& layers, bool with_embedding, bool with_head, Device device)
    : specs_(param_specs(config)), layers_(config.layers), device_(device), compute_dtype_(config.dtype) {
  for (int i = 0; i < static_cast<int>(specs_.size()); ++i) {
    const ParamSpec& spec = specs_[i];
    const bool held = spec.layer >= 0            ? std::count(layers.begin(), layers.end(), spec.layer) > 0
                      : spec.name == "embedding" ? with_embedding
                                                 : with_head;
    if (!held) continue;
    for (const ParamBlock& b : blocks_of(specs_, i, parallel, coords)) {
      Param p;
      p.spec = &specs_[i];
      p.block = b;
      p.unit = unit_of(spec, config.layers);
      p.group = spec.group;
      p.sp_partial = spec.sp_partial;
      p.is_layernorm = spec.is_layernorm;
      {
        MemoryScope scope(MemoryKind::weights);
        p.value = Tensor::zeros(b.local, DType::f32, device);
        p.compute = compute_dtype_ == DType::f32 ? p.value : Tensor::zeros(b.local, compute_dtype_, device);
      }
      MemoryScope scope(MemoryKind::gradients);
      p.grad = Tensor::zeros(b.local, DType::f32, device);
      params_.push_back(std::move(p));
    }
  }
}

// The initial values are drawn on the host (f64 + mean, rounded to f32 once,
// as init_global gives the reference) and copied to the device: the same
// bits on either device, and one implementation of the mean shift.
void ParamStore::initialize(uint64_t seed) {
  for (Param& p : params_) {
    p.value.copy_from(init_block(*p.spec, seed, p.block.offset, p.block.local, DType::f32));
    p.grad.zero();
  }
  refresh_compute();
}

void ParamStore::refresh_compute() { refresh_compute(trained_set().params); }

dp::TrainedSet ParamStore::trained_set() {
  dp::TrainedSet set;
  for (Param& p : params_) set.params.push_back(&p);
  set.device = device_;
  set.units = unit_count(layers_);
  set.refresh_compute = [this](const std::vector<dp::TrainedParam*>& params) { refresh_compute(params); };
  return set;
}

// Every TrainedParam of this store is a Param (trained_set hands out no other).
void ParamStore::refresh_compute(const std::vector<dp::TrainedParam*>& trained) {
  if (compute_dtype_ == DType::f32) return;
  for (dp::TrainedParam* t : trained) {
    Param* p = static_cast<Param*>(t);
    if (device_ == Device::host) p->compute.copy_from(p->value.to(compute_dtype_));
    else  // in place on the compute stream: no temporary device allocation per parameter
      cuda_convert(p->compute.raw(), compute_dtype_, p->value.raw(), DType::f32, static_cast<size_t>(p->value.numel()));
  }
}

void ParamStore::zero_grads() {
  for (Param& p : params_) p.grad.zero();
}

Param& ParamStore::get(const std::string& name, int local_expert) {
  for (Param& p : params_)
    if (p.spec->name == name && p.block.local_expert == local_expert) return p;
  throw RuntimeError(cat("ParamStore: this rank holds no block of ", name,
                         local_expert >= 0 ? cat(" for local expert ", local_expert) : std::string()));
}

bool ParamStore::holds(const std::string& name) const {
  return std::any_of(params_.begin(), params_.end(), [&](const Param& p) { return p.spec->name == name; });
}

}  // namespace sextant::model
