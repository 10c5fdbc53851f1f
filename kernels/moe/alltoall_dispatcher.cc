// The all-to-all dispatcher (Megatron MoEAlltoAllTokenDispatcher):
//
//   permuted rows      [rows, h]      grouped by expert e = d L + l (d: EP rank, l: local expert)
//     all_to_all_v over EP  ->  EP layout   [s][l]      (s: EP source)
//     all-gather-v over ETP ->  ETP layout  [u][s][l]   (u: ETP source)
//     sort                  ->  per local expert l: rows of (u, s) in order
//
// and the inverse for the combine. Without ETP the EP exchange runs as one
// all_to_all_v per local expert straight into the expert tensors (no sort;
// see Round). With one rank in a group its collective is skipped.
#include <algorithm>
#include <numeric>

#include "harness/error.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/moe/dispatcher.h"
#include "kernels/moe/dispatcher_common.h"
#include "kernels/moe/permute.h"

namespace sextant::moe {
namespace {

// Rows of ETP source u, EP source s for local expert l: where they sit in the
// ETP layout (at) and in their expert's tensor (expert_at).
struct Chunk {
  int64_t rows = 0, at = 0, expert_at = 0;
  int expert = 0;
};

class AllToAllDispatcher : public TokenDispatcher {
 public:
  AllToAllDispatcher(const DispatchComms& comms, int experts, const DispatchFaults& faults)
      : ep_(*comms.ep), etp_(*comms.etp), experts_(experts), local_(experts / comms.ep->size()), faults_(faults) {}

  std::vector<Tensor> dispatch(const Tensor& x, const Routing& routing) override {
    device_ = x.device();
    ScopedTimer watch(&stats_.dispatch_s, wall_clock_on(device_));
    slots_ = &routing.slots;
    h_ = x.dim(1);
    row_bytes_ = h_ * static_cast<int64_t>(dtype_size(x.dtype()));
    perm_ = group_by_expert(routing.slots, 0, experts_);
    exchange_counts();
    Tensor& rows = cache_.get("fwd.rows", {perm_.rows(), h_}, x.dtype(), device_);
    permute_rows_into(x, routing.slots, perm_, false, rows);
    const double comm_before = stats_.comm_s;
    std::vector<Tensor> experts = to_experts(rows, "fwd");
    stats_.dispatch_comm_s += stats_.comm_s - comm_before;
    const int64_t own = recv_rows_[ep_.rank()];
    stats_.dispatch_recv_bytes = (sum(recv_rows_) - own + sum(etp_rows_) - own_ep_rows()) * row_bytes_;
    stats_.expert_rows = sum(expert_rows_);
    return experts;
  }

  Tensor combine(const std::vector<Tensor>& expert_out) override {
    ScopedTimer watch(&stats_.combine_s, wall_clock_on(device_));
    out_rows_ = from_experts(expert_out, "fwd");
    stats_.combine_recv_bytes =
        ((etp_.size() - 1) * own_ep_rows() + sum(send_rows_) - send_rows_[ep_.rank()]) * row_bytes_;
    return unpermute(out_rows_, !faults_.combine_without_probs, "fwd.y");
  }

  std::vector<Tensor> combine_backward(const Tensor& dy, std::vector<float>& dprob) override {
    const bool use_probs = !faults_.combine_without_probs;
    if (use_probs) accumulate_row_dots(dy, out_rows_, *slots_, perm_, dprob);
    Tensor& rows = cache_.get("bwd.rows", {perm_.rows(), h_}, dy.dtype(), device_);
    permute_rows_into(dy, *slots_, perm_, use_probs, rows);
    return to_experts(rows, "bwd");
  }

  Tensor dispatch_backward(const std::vector<Tensor>& d_expert_in) override {
    return unpermute(from_experts(d_expert_in, "bwd"), false, "bwd.dx");
  }

 private:
  // The weighted sum of each token's rows; on the host into the cached
  // buffer `name` (a fresh one page-faults on first touch).
  Tensor unpermute(const Tensor& rows, bool use_probs, const std::string& name) {
    if (!rows.is_host()) return unpermute_rows(rows, *slots_, perm_, use_probs, faults_.unpermute_wrong_order);
    Tensor& y = cache_.get(name, {slots_->tokens, h_}, rows.dtype());
    unpermute_rows_from(row_addresses(rows), *slots_, perm_, use_probs, faults_.unpermute_wrong_order, y);
    return y;
  }

  static int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }
  int64_t own_ep_rows() const { return sum(recv_rows_); }

  // Per-expert counts to the owners (all_to_all over EP), then every ETP
  // peer's received counts (all_gather over ETP): the layouts of every buffer.
  void exchange_counts() {
    const int p = ep_.size(), q = etp_.size(), l = local_;
    std::vector<int64_t> count = perm_.count;
    if (faults_.wrong_rank) move_one_row_to_neighbour(count, p, l);
    std::vector<double> send(count.begin(), count.end()), recv(send.size());
    {
      ScopedTimer watch(&stats_.comm_s, wall_clock_on(device_));
      if (p > 1) small_all_to_all(ep_, send.data(), recv.data(), static_cast<size_t>(l));
      else recv = send;
    }
    send_count_ = count;
    recv_count_.assign(recv.begin(), recv.end());
    send_rows_.assign(p, 0);
    recv_rows_.assign(p, 0);
    for (int d = 0; d < p; ++d)
      for (int e = 0; e < l; ++e) {
        send_rows_[d] += count[d * l + e];
        recv_rows_[d] += static_cast<int64_t>(recv[d * l + e]);
      }
    std::vector<double> all(static_cast<size_t>(q) * recv.size());
    {
      ScopedTimer watch(&stats_.comm_s, wall_clock_on(device_));
      if (q > 1) small_all_gather(etp_, recv.data(), all.data(), recv.size());
      else all = recv;
    }
    chunks_.clear();
    etp_rows_.assign(q, 0);
    expert_rows_.assign(l, 0);
    int64_t at = 0;
    for (int u = 0; u < q; ++u)
      for (int s = 0; s < p; ++s)
        for (int e = 0; e < l; ++e) {
          const int64_t rows = static_cast<int64_t>(all[(u * p + s) * l + e]);
          chunks_.push_back({rows, at, expert_rows_[e], e});
          at += rows;
          expert_rows_[e] += rows;
          etp_rows_[u] += rows;
        }
  }

  // Row counts -> element counts and displacements of an all_to_all_v.
  struct Counts {
    std::vector<size_t> counts, displs;
  };
  Counts elements(const std::vector<int64_t>& rows) const {
    Counts c;
    size_t at = 0;
    for (int64_t r : rows) {
      c.counts.push_back(static_cast<size_t>(r * h_));
      c.displs.push_back(at);
      at += static_cast<size_t>(r * h_);
    }
    return c;
  }

  // Into the cached buffer `name`. broadcast_send: every peer gets the whole
  // send buffer (an all-gather-v).
  Tensor all_to_all_v(Communicator& comm, const Tensor& send, const std::vector<int64_t>& send_rows,
                      const std::vector<int64_t>& recv_rows, const std::string& name, bool broadcast_send = false) {
    Counts s = elements(send_rows);
    const Counts r = elements(recv_rows);
    if (broadcast_send) std::fill(s.displs.begin(), s.displs.end(), size_t{0});
    Tensor out = cache_.get(name, {sum(recv_rows), h_}, send.dtype(), device_);
    ScopedTimer watch(&stats_.comm_s, wall_clock_on(device_));
    comm.all_to_all_v(send.raw(), s.counts, s.displs, out.raw(), r.counts, r.displs, send.dtype());
    return out;
  }

  // permuted rows -> EP layout -> ETP layout -> per local expert. `pass`
  // ("fwd", "bwd") names the cached buffers.
  std::vector<Tensor> to_experts(const Tensor& permuted, const std::string& pass) {
    if (etp_.size() == 1 && ep_.size() > 1) return rounds_to_experts(permuted, pass);
    Tensor ep_rows = ep_.size() > 1 ? all_to_all_v(ep_, permuted, send_rows_, recv_rows_, pass + ".ep") : permuted;
    Tensor etp_rows = ep_rows;
    if (etp_.size() > 1)  // all-gather-v: the whole EP layout to every ETP peer
      etp_rows =
          all_to_all_v(etp_, ep_rows, std::vector<int64_t>(etp_.size(), own_ep_rows()), etp_rows_, pass + ".etp", true);
    std::vector<Tensor> experts;
    for (size_t l = 0; l < expert_rows_.size(); ++l)
      experts.push_back(
          cache_.get(pass + ".expert" + std::to_string(l), {expert_rows_[l], h_}, permuted.dtype(), device_));
    for (const Chunk& c : chunks_) copy_rows(etp_rows, c.at, experts[c.expert], c.expert_at, c.rows);
    return experts;
  }

  // per local expert -> ETP layout -> EP layout (summed over ETP) -> permuted rows.
  Tensor from_experts(const std::vector<Tensor>& experts, const std::string& pass) {
    if (experts.size() != expert_rows_.size())
      throw RuntimeError(
          cat("moe dispatcher: ", experts.size(), " expert tensors for ", expert_rows_.size(), " local experts"));
    if (etp_.size() == 1 && ep_.size() > 1) return rounds_from_experts(experts, pass);
    const DType dtype = experts.empty() ? DType::f32 : experts.front().dtype();
    Tensor etp_rows = cache_.get(pass + ".unsort", {sum(etp_rows_), h_}, dtype, device_);
    for (const Chunk& c : chunks_) copy_rows(experts[c.expert], c.expert_at, etp_rows, c.at, c.rows);
    Tensor ep_rows = etp_rows;
    if (etp_.size() > 1) {  // reduce-scatter-v: each peer's rows to it, then the sum in peer order
      const int q = etp_.size();
      Tensor parts = all_to_all_v(etp_, etp_rows, etp_rows_, std::vector<int64_t>(q, own_ep_rows()), pass + ".parts");
      ep_rows = sum_blocks(parts, q);
    }
    return ep_.size() > 1 ? all_to_all_v(ep_, ep_rows, recv_rows_, send_rows_, pass + ".back") : ep_rows;
  }

  // EP without ETP: one all_to_all_v per local expert l moves the rows of
  // expert (d, l) of every rank d straight into expert l's tensor, in source
  // order, so no sort copy is needed; the combine runs the rounds backwards.
  // L - 1 more collective latencies buy one copy of every row less each way.
  struct Round {
    Counts rows, experts;  // in the permuted rows; in the expert's tensor
  };
  Round round(int l) const {
    const int p = ep_.size();
    Round r;
    int64_t at = 0;
    std::vector<int64_t> displ(send_count_.size() + 1, 0);
    for (size_t e = 0; e < send_count_.size(); ++e) displ[e + 1] = displ[e] + send_count_[e];
    for (int d = 0; d < p; ++d) {
      r.rows.counts.push_back(static_cast<size_t>(send_count_[d * local_ + l] * h_));
      r.rows.displs.push_back(static_cast<size_t>(displ[d * local_ + l] * h_));
      r.experts.counts.push_back(static_cast<size_t>(recv_count_[d * local_ + l] * h_));
      r.experts.displs.push_back(static_cast<size_t>(at * h_));
      at += recv_count_[d * local_ + l];
    }
    return r;
  }
  std::vector<Tensor> rounds_to_experts(const Tensor& permuted, const std::string& pass) {
    std::vector<Tensor> experts;
    for (int l = 0; l < local_; ++l) {
      experts.push_back(
          cache_.get(pass + ".expert" + std::to_string(l), {expert_rows_[l], h_}, permuted.dtype(), device_));
      const Round r = round(l);
      ScopedTimer watch(&stats_.comm_s, wall_clock_on(device_));
      ep_.all_to_all_v(permuted.raw(), r.rows.counts, r.rows.displs, experts[l].raw(), r.experts.counts,
                       r.experts.displs, permuted.dtype());
    }
    return experts;
  }
  Tensor rounds_from_experts(const std::vector<Tensor>& experts, const std::string& pass) {
    const DType dtype = experts.front().dtype();
    Tensor out = cache_.get(pass + ".back", {sum(send_count_), h_}, dtype, device_);
    for (int l = 0; l < local_; ++l) {
      const Round r = round(l);
      ScopedTimer watch(&stats_.comm_s, wall_clock_on(device_));
      ep_.all_to_all_v(experts[l].raw(), r.experts.counts, r.experts.displs, out.raw(), r.rows.counts, r.rows.displs,
                       dtype);
    }
    return out;
  }

  Communicator& ep_;
  Communicator& etp_;
  int experts_, local_;
  DispatchFaults faults_;
  const SlotTable* slots_ = nullptr;
  Permutation perm_;
  int64_t h_ = 0, row_bytes_ = 0;
  Device device_ = Device::host;                  // of the batch in flight
  std::vector<int64_t> send_count_, recv_count_;  // [E], [P * L]: rows to each expert, from (peer, local expert)
  std::vector<int64_t> send_rows_, recv_rows_;    // [P] rows to / from each EP peer
  std::vector<int64_t> etp_rows_;                 // [Q] EP-layout rows of each ETP peer
  std::vector<int64_t> expert_rows_;              // [L] rows of each local expert
  std::vector<Chunk> chunks_;                     // the ETP layout, in order
  Tensor out_rows_;                               // expert outputs in permuted order (for dprob)
  BufferCache cache_;
};

}  // namespace

std::unique_ptr<TokenDispatcher> make_alltoall_dispatcher(const DispatchComms& comms, int experts,
                                                          const DispatchFaults& faults) {
  return std::make_unique<AllToAllDispatcher>(comms, experts, faults);
}

}  // namespace sextant::moe
