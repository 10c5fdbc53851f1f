// The all-gather dispatcher (Megatron MoEAllGatherTokenDispatcher): every
// rank of an ETP x EP block sees every token of the block,
//
//   x [T, h]  --all_gather EP-->  [P T, h]  --all_gather ETP-->  [Q P T, h]  (block u, then s)
//
// with the routing of those tokens, keeps the rows of its local experts, and
// sends the weighted partial outputs back with reduce_scatter over ETP, then
// EP (the inverse order). Every rank must hold the same number of tokens.
#include "harness/error.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/moe/dispatcher.h"
#include "kernels/moe/dispatcher_common.h"
#include "kernels/moe/permute.h"

namespace sextant::moe {
namespace {

class AllGatherDispatcher : public TokenDispatcher {
 public:
  AllGatherDispatcher(const DispatchComms& comms, int experts, const DispatchFaults& faults)
      : ep_(*comms.ep), etp_(*comms.etp), local_(experts / comms.ep->size()), faults_(faults) {}

  std::vector<Tensor> dispatch(const Tensor& x, const Routing& routing) override {
    device_ = x.device();
    ScopedTimer watch(&stats_.dispatch_s, wall_clock_on(device_));
    slots_ = &routing.slots;
    tokens_ = x.dim(0);
    require_equal_tokens(tokens_);
    const double comm_before = stats_.comm_s;
    const Tensor xs = gather(x);
    stats_.dispatch_comm_s += stats_.comm_s - comm_before;
    slots_all_ = unpack(on_host(gather(to_device(pack(routing.slots)))), routing.slots.topk);
    perm_ = group_by_expert(slots_all_, ep_.rank() * local_, local_);
    const int64_t others = xs.dim(0) - tokens_;
    stats_.dispatch_recv_bytes =
        others * static_cast<int64_t>(x.dim(1) * dtype_size(x.dtype()) + 3 * slots_->topk * sizeof(float));
    stats_.expert_rows = perm_.rows();
    return split(permute_rows(xs, slots_all_, perm_));
  }

  Tensor combine(const std::vector<Tensor>& expert_out) override {
    ScopedTimer watch(&stats_.combine_s, wall_clock_on(device_));
    out_rows_ = join(expert_out);
    const Tensor ys =
        unpermute_rows(out_rows_, slots_all_, perm_, !faults_.combine_without_probs, faults_.unpermute_wrong_order);
    const int64_t p = ep_.size(), q = etp_.size();
    stats_.combine_recv_bytes =
        ((q - 1) * p * tokens_ + (p - 1) * tokens_) * static_cast<int64_t>(ys.dim(1) * dtype_size(ys.dtype()));
    return reduce(ys);
  }

  std::vector<Tensor> combine_backward(const Tensor& dy, std::vector<float>& dprob) override {
    const bool use_probs = !faults_.combine_without_probs;
    const Tensor dys = gather(dy);
    if (use_probs) {  // partial dots (this rank's experts and FFN slice), summed by the reduce
      std::vector<float> partial(static_cast<size_t>(slots_all_.slots()), 0.0f);
      accumulate_row_dots(dys, out_rows_, slots_all_, perm_, partial);
      Tensor dots = Tensor::empty({slots_all_.tokens, slots_all_.topk}, DType::f32);
      std::copy(partial.begin(), partial.end(), dots.data<float>());
      const Tensor mine = on_host(reduce(to_device(dots)));
      for (int64_t i = 0; i < mine.numel(); ++i) dprob[i] += mine.data<float>()[i];
    }
    return split(permute_rows_weighted(dys, slots_all_, perm_, use_probs));
  }

  Tensor dispatch_backward(const std::vector<Tensor>& d_expert_in) override {
    return reduce(unpermute_rows(join(d_expert_in), slots_all_, perm_, false, faults_.unpermute_wrong_order));
  }

 private:
  // The all-gathers need equal blocks: two tiny all-reduces per dispatch turn
  // a mismatch into an error instead of corrupt rows.
  void require_equal_tokens(int64_t tokens) {
    ScopedTimer watch(&stats_.comm_s, wall_clock_on(device_));
    for (Communicator* c : {&ep_, &etp_}) {
      double range[2] = {static_cast<double>(tokens), -static_cast<double>(tokens)};
      small_all_reduce(*c, range, 2, ReduceOp::max);
      if (range[0] != -range[1])
        throw RuntimeError(cat("moe allgather dispatcher: ranks hold ", -range[1], " to ", range[0],
                               " tokens; the all-gather needs the same count on every rank"));
    }
  }

  // [T, w] -> [Q P T, w]: all_gather over EP, then over ETP.
  Tensor gather(const Tensor& local) {
    ScopedTimer watch(&stats_.comm_s, wall_clock_on(device_));
    Tensor out = local;
    for (Communicator* c : {&ep_, &etp_}) {
      if (c->size() == 1) continue;
      Tensor all = Tensor::empty({out.dim(0) * c->size(), out.dim(1)}, out.dtype(), out.device());
      c->all_gather(out, all);
      out = all;
    }
    return out;
  }

  // [Q P T, w] -> [T, w]: reduce_scatter (sum) over ETP, then over EP.
  Tensor reduce(const Tensor& all) {
    ScopedTimer watch(&stats_.comm_s, wall_clock_on(device_));
    Tensor out = all;
    for (Communicator* c : {&etp_, &ep_}) {
      if (c->size() == 1) continue;
      Tensor mine = Tensor::empty({out.dim(0) / c->size(), out.dim(1)}, out.dtype(), out.device());
      c->reduce_scatter(out, mine);
      out = mine;
    }
    return out;
  }

  // The routing table travels with the rows: on their device, and back to the host to be read.
  Tensor to_device(const Tensor& t) const { return t.device() == device_ ? t : t.to(device_); }
  static Tensor on_host(const Tensor& t) { return t.is_host() ? t : t.to(Device::host); }

  // Routing of a rank's tokens as f32 [T, 3k]: expert, probability, kept.
  static Tensor pack(const SlotTable& s) {
    Tensor t = Tensor::empty({s.tokens, 3 * s.topk}, DType::f32);
    float* out = t.data<float>();
    for (int64_t slot = 0; slot < s.slots(); ++slot) {
      const int64_t at = (slot / s.topk) * 3 * s.topk + 3 * (slot % s.topk);
      out[at] = static_cast<float>(s.expert[slot]);  // exact: experts < 2^24
      out[at + 1] = s.prob[slot];
      out[at + 2] = s.kept[slot];
    }
    return t;
  }
  static SlotTable unpack(const Tensor& t, int topk) {
    SlotTable s;
    s.tokens = t.dim(0);
    s.topk = topk;
    const float* in = t.data<float>();
    for (int64_t slot = 0; slot < s.slots(); ++slot) {
      const int64_t at = (slot / topk) * 3 * topk + 3 * (slot % topk);
      s.expert.push_back(static_cast<int32_t>(in[at]));
      s.prob.push_back(in[at + 1]);
      s.kept.push_back(in[at + 2] != 0.0f);
    }
    return s;
  }

  std::vector<Tensor> split(const Tensor& rows) const {
    std::vector<Tensor> experts;
    for (int l = 0; l < local_; ++l) {
      experts.push_back(Tensor::empty({perm_.count[l], rows.dim(1)}, rows.dtype(), rows.device()));
      copy_rows(rows, perm_.offset[l], experts.back(), 0, perm_.count[l]);
    }
    return experts;
  }
  Tensor join(const std::vector<Tensor>& experts) const {
    if (static_cast<int>(experts.size()) != local_)
      throw RuntimeError(cat("moe dispatcher: ", experts.size(), " expert tensors for ", local_, " local experts"));
    Tensor rows =
        Tensor::empty({perm_.rows(), experts.front().dim(1)}, experts.front().dtype(), experts.front().device());
    for (int l = 0; l < local_; ++l) copy_rows(experts[l], 0, rows, perm_.offset[l], perm_.count[l]);
    return rows;
  }

  Communicator& ep_;
  Communicator& etp_;
  int local_;
  DispatchFaults faults_;
  const SlotTable* slots_ = nullptr;  // this rank's tokens
  int64_t tokens_ = 0;
  Device device_ = Device::host;  // of the batch in flight
  SlotTable slots_all_;           // every token of the block
  Permutation perm_;              // rows of the local experts among them
  Tensor out_rows_;               // expert outputs in permuted order (for dprob)
};

}  // namespace

std::unique_ptr<TokenDispatcher> make_allgather_dispatcher(const DispatchComms& comms, int experts,
                                                           const DispatchFaults& faults) {
  return std::make_unique<AllGatherDispatcher>(comms, experts, faults);
}

}  // namespace sextant::moe
