#include "kernels/data_parallel/optimizer.h"

#include <algorithm>
#include <map>

#include "harness/error.h"
#include "harness/memory_use.h"

namespace sextant::dp {

namespace {

std::vector<Tensor> grads_of(const std::vector<TrainedParam*>& params) {
  std::vector<Tensor> out;
  for (const TrainedParam* p : params) out.push_back(p->grad);
  return out;
}
std::vector<Tensor> values_of(const std::vector<TrainedParam*>& params) {
  std::vector<Tensor> out;
  for (const TrainedParam* p : params) out.push_back(p->value);
  return out;
}

// Blocks back to back in one flat buffer, zero padded. On a device: one
// device-to-device copy per block (separate allocations), into a buffer
// zeroed first.
void pack(const std::vector<Tensor>& blocks, Tensor& flat) {
  if (!flat.is_host()) {
    flat.zero();
    int64_t at = 0;
    for (const Tensor& t : blocks) {
      write_slice(flat, 0, at, t.reshape({t.numel()}));
      at += t.numel();
    }
    return;
  }
  float* at = flat.data<float>();
  for (const Tensor& t : blocks) at = std::copy_n(t.data<float>(), t.numel(), at);
  std::fill(at, flat.data<float>() + flat.numel(), 0.0f);  // the padding
}

// The blocks from a flat buffer (they share storage with what they view).
void unpack(const Tensor& flat, std::vector<Tensor> blocks) {
  int64_t at = 0;
  for (Tensor& t : blocks) {
    if (flat.is_host()) std::copy_n(flat.data<float>() + at, t.numel(), t.data<float>());
    else t.copy_from(narrow(flat, 0, at, t.numel()).reshape(t.shape()));
    at += t.numel();
  }
}

int64_t slice_of(const Tensor& flat, const Communicator& group) { return flat.numel() / group.size(); }

}  // namespace

Optimizer::Optimizer(TrainedSet params, const OptimizerComms& comms, const OptimizerConfig& config,
                     OptimizerFaults faults)
    : set_(std::move(params)),
      comms_(comms),
      adam_(config.adam),
      distributed_(config.distributed),
      overlap_(config.overlap),
      faults_(faults) {
  build_buckets(config.bucket_mb);
  if (distributed_) return;  // the moments of each bucket's slice instead (close_bucket)
  MemoryScope scope(MemoryKind::optimizer);
  for (TrainedParam* p : set_.params) {
    p->exp_avg = Tensor::zeros(p->value.shape(), DType::f32, set_.device);
    p->exp_avg_sq = Tensor::zeros(p->value.shape(), DType::f32, set_.device);
  }
}

// The units from last to first; each unit's dense and expert blocks join the
// open bucket of their group, which closes once it reaches bucket_mb.
void Optimizer::build_buckets(double bucket_mb) {
  const double limit = bucket_mb * (1 << 20) / sizeof(float);  // elements
  const int units = set_.units;
  unit_buckets_.assign(static_cast<size_t>(units), {});
  Bucket open[2];  // dense, expert
  open[0].group = faults_.skip_cp ? comms_.dp : comms_.dp_cp;
  open[1].group = faults_.experts_over_dp ? comms_.dp : comms_.edp;
  for (int u = units - 1; u >= 0; --u) {
    for (TrainedParam* p : set_.params) {
      if (p->unit != u) continue;
      Bucket& b = open[p->group == GradGroup::expert ? 1 : 0];
      b.params.push_back(p);
      b.numel += p->value.numel();
      if (b.units.empty() || b.units.back() != u) b.units.push_back(u);
    }
    for (Bucket& b : open)
      if (!b.params.empty() && static_cast<double>(b.numel) >= limit) close_bucket(b);
  }
  for (Bucket& b : open)
    if (!b.params.empty()) close_bucket(b);
}

// Moves the open bucket into the list (its buffers allocated) and leaves an empty one of the same group.
void Optimizer::close_bucket(Bucket& b) {
  const int64_t n = b.group->size();
  b.padded = (b.numel + n - 1) / n * n;
  const Device device = set_.device;
  MemoryScope comm(MemoryKind::communication);
  b.grads = Tensor::zeros({b.padded}, DType::f32, device);
  if (distributed_) {
    const int64_t slice = b.padded / n;
    b.gathered = Tensor::zeros({b.padded}, DType::f32, device);
    b.grad_slice = Tensor::zeros({slice}, DType::f32, device);
    MemoryScope optimizer(MemoryKind::optimizer);  // the f32 master slice and its moments
    b.param_slice = Tensor::zeros({slice}, DType::f32, device);
    b.exp_avg = Tensor::zeros({slice}, DType::f32, device);
    b.exp_avg_sq = Tensor::zeros({slice}, DType::f32, device);
  }
  if (comms_.sp && comms_.tp->size() > 1)
    for (TrainedParam* p : b.params)
      if (p->sp_partial && !(faults_.skip_layernorm_tp && p->is_layernorm)) b.tp_partial.push_back(p);
  for (int u : b.units) unit_buckets_[static_cast<size_t>(u)].push_back(static_cast<int>(buckets_.size()));
  Communicator* group = b.group;
  buckets_.push_back(std::move(b));
  b = Bucket{};
  b.group = group;
}

void Optimizer::set_overlap(Overlap overlap) {
  finish_param_gathers();
  overlap_ = overlap;
}

void Optimizer::reset() {
  finish_param_gathers();
  for (Bucket& b : buckets_)
    if (b.reduce) finish_reduce(b);
  t_ = 0;
  if (!distributed_)
    for (TrainedParam* p : set_.params) p->exp_avg.zero(), p->exp_avg_sq.zero();
  for (Bucket& b : buckets_)
    if (distributed_) b.exp_avg.zero(), b.exp_avg_sq.zero();
}

void Optimizer::begin_backward() {
  started_in_backward_ = 0;
  for (Bucket& b : buckets_) {
    b.units_pending = static_cast<int>(b.units.size());
    b.started = false;
  }
}

// Under SP the replicated parameters outside the TP region saw only this
// rank's sequence shard: their gradients are partial sums over TP.
void Optimizer::reduce_tp_partial(const Bucket& b) {
  if (b.tp_partial.empty()) return;
  int64_t numel = 0;
  for (const TrainedParam* p : b.tp_partial) numel += p->grad.numel();
  Tensor flat = Tensor::empty({numel}, DType::f32, set_.device);
  pack(grads_of(b.tp_partial), flat);
  comms_.tp->all_reduce(flat);
  unpack(flat, grads_of(b.tp_partial));
}

void Optimizer::start_reduce(Bucket& b) {
  b.started = true;
  reduce_tp_partial(b);
  pack(grads_of(b.params), b.grads);
  if (distributed_)
    b.reduce = b.group->ireduce_scatter(b.grads.raw(), b.grad_slice.raw(), static_cast<size_t>(b.grad_slice.numel()),
                                        DType::f32, ReduceOp::sum);
  else
    b.reduce =
        b.group->iall_reduce(b.grads.raw(), b.grads.raw(), static_cast<size_t>(b.padded), DType::f32, ReduceOp::sum);
}

void Optimizer::finish_reduce(Bucket& b) {
  b.reduce->wait();
  b.reduce.reset();
  if (!distributed_) unpack(b.grads, grads_of(b.params));
}

void Optimizer::gradients_final(int unit) {
  if (!overlap_.grad_reduce) return;
  for (int i : unit_buckets_.at(static_cast<size_t>(unit))) {
    Bucket& b = buckets_[static_cast<size_t>(i)];
    if (--b.units_pending == 0 && !b.started) {
      start_reduce(b);
      ++started_in_backward_;
    }
  }
}

void Optimizer::progress() {
  for (Bucket& b : buckets_) {
    if (b.reduce) b.reduce->test();
    if (b.gather) b.gather->test();
  }
}

// With overlap, what the backward did not start starts now, then all are
// waited for; without, each bucket is reduced and waited for in turn.
void Optimizer::reduce_gradients() {
  for (Bucket& b : buckets_) {
    if (!b.started) start_reduce(b);
    if (!overlap_.grad_reduce) finish_reduce(b);
  }
  for (Bucket& b : buckets_)
    if (b.reduce) finish_reduce(b);
}

void Optimizer::gather_gradients() {
  if (!distributed_) return;
  for (Bucket& b : buckets_) {
    Tensor flat = Tensor::empty({b.padded}, DType::f32, set_.device);
    b.group->all_gather(b.grad_slice, flat);
    unpack(flat, grads_of(b.params));
  }
}

void Optimizer::step() {
  ++t_;
  if (!distributed_) {
    for (TrainedParam* p : set_.params) ops::adam_step(p->value, p->grad, p->exp_avg, p->exp_avg_sq, t_, adam_);
    set_.refresh_compute(set_.params);
    return;
  }
  // Forward order: the gather the next forward needs first starts first.
  for (auto it = buckets_.rbegin(); it != buckets_.rend(); ++it) {
    Bucket& b = *it;
    if (b.gather) finish_gather(b);  // the values the last gather brings are this step's start
    const int64_t slice = slice_of(b.gathered, *b.group);
    pack(values_of(b.params), b.gathered);
    b.param_slice.copy_from(narrow(b.gathered, 0, b.group->rank() * slice, slice));
    ops::adam_step(b.param_slice, b.grad_slice, b.exp_avg, b.exp_avg_sq, t_, adam_);
    b.gather = b.group->iall_gather(b.param_slice.raw(), b.gathered.raw(), static_cast<size_t>(slice), DType::f32);
    if (!overlap_.param_gather) finish_gather(b);
  }
}

void Optimizer::finish_gather(Bucket& b) {
  b.gather->wait();
  b.gather.reset();
  unpack(b.gathered, values_of(b.params));
  set_.refresh_compute(b.params);  // bf16: the kernels' copies of the new weights
}

void Optimizer::before_forward(int unit) {
  if (faults_.unwaited_params) return;
  for (int i : unit_buckets_.at(static_cast<size_t>(unit))) {
    Bucket& b = buckets_[static_cast<size_t>(i)];
    if (b.gather) finish_gather(b);
  }
}

void Optimizer::finish_param_gathers() {
  for (auto it = buckets_.rbegin(); it != buckets_.rend(); ++it)
    if (it->gather) finish_gather(*it);
}

std::vector<Tensor> Optimizer::parameter_values() {
  std::vector<Tensor> out;
  std::map<const TrainedParam*, size_t> index;
  for (const TrainedParam* p : set_.params) {
    index[p] = out.size();
    out.push_back(p->value);
  }
  for (Bucket& b : buckets_) {
    if (!b.gather) continue;
    // The same slices gathered again into a scratch buffer (the pending gather keeps its own).
    Tensor flat = Tensor::empty({b.padded}, DType::f32, set_.device);
    b.group->all_gather(b.param_slice, flat);
    std::vector<Tensor> copies;
    for (TrainedParam* p : b.params) {
      Tensor& slot = out[index.at(p)];
      slot = Tensor::zeros(p->value.shape(), DType::f32, set_.device);
      copies.push_back(slot);
    }
    unpack(flat, copies);
  }
  return out;
}

}  // namespace sextant::dp
