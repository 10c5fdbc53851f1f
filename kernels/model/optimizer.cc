#include "kernels/model/optimizer.h"

#include <algorithm>

#include "harness/error.h"

namespace sextant::model {

Optimizer::Optimizer(ParamStore& store, const OptimizerComms& comms, const ops::AdamConfig& adam, bool distributed,
                     ReduceFaults faults)
    : store_(store), comms_(comms), adam_(adam), distributed_(distributed), faults_(faults) {
  Bucket dense, expert;
  dense.group = faults.skip_cp ? comms.dp : comms.dp_cp;
  expert.group = faults.experts_over_dp ? comms.dp : comms.edp;
  for (Param& p : store.params()) {
    Bucket& b = p.spec->group == GradGroup::expert ? expert : dense;
    b.params.push_back(&p);
    b.numel += p.value.numel();
  }
  for (Bucket* b : {&dense, &expert}) {
    if (b->params.empty()) continue;
    const int64_t n = b->group->size();
    b->padded = (b->numel + n - 1) / n * n;
    const int64_t slice = b->padded / n;
    const Device device = store.device();
    b->grad_slice = Tensor::zeros({slice}, DType::f32, device);
    b->param_slice = Tensor::zeros({slice}, DType::f32, device);
    b->exp_avg = Tensor::zeros({slice}, DType::f32, device);
    b->exp_avg_sq = Tensor::zeros({slice}, DType::f32, device);
    buckets_.push_back(std::move(*b));
  }
}

void Optimizer::reset() {
  t_ = 0;
  for (Param& p : store_.params()) p.exp_avg.zero(), p.exp_avg_sq.zero();
  for (Bucket& b : buckets_) b.exp_avg.zero(), b.exp_avg_sq.zero();
}

// A bucket's blocks back to back in one flat buffer, zero padded. On a
// device: one device-to-device copy per block (the blocks are separate
// allocations), into a buffer zeroed first.
void Optimizer::pack(const Bucket& b, bool grads, Tensor& flat) const {
  if (!flat.is_host()) {
    flat.zero();
    int64_t at = 0;
    for (const Param* p : b.params) {
      const Tensor& t = grads ? p->grad : p->value;
      write_slice(flat, 0, at, t.reshape({t.numel()}));
      at += t.numel();
    }
    return;
  }
  float* at = flat.data<float>();
  for (const Param* p : b.params) {
    const Tensor& t = grads ? p->grad : p->value;
    at = std::copy_n(t.data<float>(), t.numel(), at);
  }
  std::fill(at, flat.data<float>() + flat.numel(), 0.0f);  // the padding
}

void Optimizer::unpack(const Bucket& b, bool grads, const Tensor& flat) {
  if (!flat.is_host()) {
    int64_t at = 0;
    for (Param* p : b.params) {
      Tensor& t = grads ? p->grad : p->value;
      t.copy_from(narrow(flat, 0, at, t.numel()).reshape(t.shape()));
      at += t.numel();
    }
    return;
  }
  const float* from = flat.data<float>();
  for (Param* p : b.params) {
    Tensor& t = grads ? p->grad : p->value;
    std::copy_n(from, t.numel(), t.data<float>());
    from += t.numel();
  }
}

// Under SP the replicated parameters outside the TP region saw only this
// rank's sequence shard: their gradients are partial sums over TP.
void Optimizer::reduce_tp_replicated() {
  if (!comms_.sp || comms_.tp->size() == 1) return;
  Bucket b;
  for (Param& p : store_.params())
    if (p.spec->sp_partial && !(faults_.skip_layernorm_tp && p.spec->is_layernorm)) {
      b.params.push_back(&p);
      b.numel += p.value.numel();
    }
  if (b.params.empty()) return;
  Tensor flat = Tensor::empty({b.numel}, DType::f32, store_.device());
  pack(b, true, flat);
  comms_.tp->all_reduce(flat);
  unpack(b, true, flat);
}

void Optimizer::reduce_gradients() {
  reduce_tp_replicated();
  for (Bucket& b : buckets_) {
    Tensor flat = Tensor::empty({b.padded}, DType::f32, store_.device());
    pack(b, true, flat);
    if (distributed_) {
      b.group->reduce_scatter(flat, b.grad_slice);
    } else {
      b.group->all_reduce(flat);
      unpack(b, true, flat);
    }
  }
}

void Optimizer::gather_gradients() {
  if (!distributed_) return;
  for (Bucket& b : buckets_) {
    Tensor flat = Tensor::empty({b.padded}, DType::f32, store_.device());
    b.group->all_gather(b.grad_slice, flat);
    unpack(b, true, flat);
  }
}

void Optimizer::step() {
  ++t_;
  if (!distributed_) {
    for (Param& p : store_.params()) ops::adam_step(p.value, p.grad, p.exp_avg, p.exp_avg_sq, t_, adam_);
    return;
  }
  for (Bucket& b : buckets_) {
    Tensor flat = Tensor::empty({b.padded}, DType::f32, store_.device());
    pack(b, false, flat);
    const int64_t slice = b.grad_slice.numel();
    b.param_slice.copy_from(narrow(flat, 0, b.group->rank() * slice, slice));
    ops::adam_step(b.param_slice, b.grad_slice, b.exp_avg, b.exp_avg_sq, t_, adam_);
    b.group->all_gather(b.param_slice, flat);
    unpack(b, false, flat);
  }
}

}  // namespace sextant::model
