#include "kernels/moe/moe_layer.h"

#include <algorithm>

#include "harness/error.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/ops/gemm.h"

namespace sextant::moe {

namespace {
Tensor as_f32(const Tensor& t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); }
Tensor as_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }
}  // namespace

MoeLayer::MoeLayer(const MoeOptions& options, const MoeComms& comms, MoeWeights weights)
    : options_(options), comms_(comms), weights_(std::move(weights)) {
  if (!comms.tokens || !comms.ep || !comms.etp || !comms.edp)
    throw RuntimeError("MoeLayer: the token, EP, ETP and EDP communicators are required");
  const int local = options.router.experts / comms.ep->size();
  if (static_cast<int>(weights_.w1.size()) != local || static_cast<int>(weights_.w2.size()) != local)
    throw RuntimeError(cat("MoeLayer: ", weights_.w1.size(), " / ", weights_.w2.size(), " expert weights for ", local,
                           " local experts"));
  options_.router.fault_wrong_drop = options.fault == Fault::capacity_drop;
  const DispatchFaults df{options.fault == Fault::wrong_rank, options.fault == Fault::combine_no_probs,
                          options.fault == Fault::unpermute_order, options.fault == Fault::neighbour_slot,
                          options.fault == Fault::weights_before_exchange};
  dispatcher_ =
      make_dispatcher(options.dispatcher, {comms.ep, comms.etp}, options.router.experts, df, options.transport);
}

Tensor MoeLayer::forward(const Tensor& x) {
  const double start = now_seconds();
  times_ = {};
  dispatcher_->reset_stats();
  x_ = x;
  const Device device = x.device();
  {
    ScopedTimer watch(&times_.router_s, wall_clock_on(device));
    routing_ = route(x, weights_.router, options_.router, *comms_.tokens);
  }
  std::vector<Tensor> in = dispatcher_->dispatch(x, routing_);
  std::vector<Tensor> out = dispatcher_->expert_outputs(false);
  out.resize(in.size());
  saved_.assign(in.size(), {});
  {
    ScopedTimer watch(&times_.experts_s, wall_clock_on(device));
    for (size_t l = 0; l < in.size(); ++l) {
      out[l] = expert_forward(in[l], weights_.w1[l], weights_.w2[l], saved_[l], out[l]);
      times_.expert_flops += expert_flops(in[l].dim(0), in[l].dim(1), weights_.w1[l].dim(1));
    }
  }
  Tensor y = dispatcher_->combine(out);
  if (device != Device::host) cuda_synchronize();  // the forward's GPU work counts
  times_.forward_s = now_seconds() - start;
  return y;
}

MoeGrads MoeLayer::backward(const Tensor& dy) {
  const Device device = dy.device();
  if (device != Device::host) cuda_synchronize();
  const double start = now_seconds();
  const DType dtype = dy.dtype();
  std::vector<float> dprob(static_cast<size_t>(routing_.slots.slots()), 0.0f);
  std::vector<Tensor> dout = dispatcher_->combine_backward(dy, dprob);
  std::vector<Tensor> din = dispatcher_->expert_outputs(true), dw1(dout.size()), dw2(dout.size());
  din.resize(dout.size());
  {
    ScopedTimer watch(&times_.experts_s, wall_clock_on(device));
    for (size_t l = 0; l < dout.size(); ++l) {
      ExpertGrads g = expert_backward(dout[l], saved_[l], weights_.w1[l], weights_.w2[l], din[l]);
      din[l] = g.din;
      dw1[l] = g.dw1;
      dw2[l] = g.dw2;
    }
  }
  Tensor dx = dispatcher_->dispatch_backward(din);
  MoeGrads grads;
  Tensor drouter = Tensor::zeros(weights_.router.shape(), DType::f32, device);
  {
    ScopedTimer watch(&times_.router_s, wall_clock_on(device));
    Tensor dlogits = router_logits_grad(routing_, dprob, options_.router);  // [T, E], on the host
    if (device != Device::host) dlogits = dlogits.to(device);
    grads.dx = router_input_grad(dlogits, dx);
    ops::gemm(as_f32(x_), true, dlogits, false, drouter);  // dW_r: [h, E] = x^T dlogits
  }
  {
    ScopedTimer watch(&times_.grad_reduce_s, wall_clock_on(device));
    comms_.tokens->all_reduce(drouter, ReduceOp::sum);
    reduce_expert_grads(dw1, dw2);
  }
  grads.router = as_dtype(drouter, weights_.router.dtype());
  for (size_t l = 0; l < dw1.size(); ++l) {
    grads.w1.push_back(as_dtype(dw1[l], dtype));
    grads.w2.push_back(as_dtype(dw2[l], dtype));
  }
  if (device != Device::host) cuda_synchronize();
  times_.backward_s = now_seconds() - start;
  times_.dispatch = dispatcher_->stats();
  return grads;
}

// dx + dlogits W_r^T, accumulated in f32: dlogits [T, E], W_r [h, E], dx [T, h].
Tensor MoeLayer::router_input_grad(const Tensor& dlogits, Tensor dx) {
  Tensor acc = dx.dtype() == DType::f32 ? dx : dx.to(DType::f32);
  ops::gemm(dlogits, false, as_f32(weights_.router), true, acc, 1.0f, 1.0f);
  return as_dtype(acc, dx.dtype());
}

// One all-reduce over EDP of every local expert's f32 gradients, packed.
void MoeLayer::reduce_expert_grads(std::vector<Tensor>& dw1, std::vector<Tensor>& dw2) {
  if (comms_.edp->size() == 1 || options_.fault == Fault::no_edp_reduce) return;
  std::vector<Tensor*> parts;
  for (size_t l = 0; l < dw1.size(); ++l) {
    parts.push_back(&dw1[l]);
    parts.push_back(&dw2[l]);
  }
  std::vector<Tensor> flat;
  for (Tensor* t : parts) flat.push_back(t->reshape({t->numel()}));
  Tensor packed = concat(flat, 0);  // on the gradients' device
  comms_.edp->all_reduce(packed, ReduceOp::sum);
  int64_t at = 0;
  for (Tensor* t : parts) {
    *t = narrow(packed, 0, at, t->numel()).reshape(t->shape());
    at += t->numel();
  }
}

}  // namespace sextant::moe
