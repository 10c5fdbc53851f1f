// The all-to-all dispatcher over peer memory (EP ranks sharing one node, no
// ETP): the exchange is the rows' one copy into their final place, as in
// DeepEP's intranode kernels.
//
//   counts      all_gather of every rank's per-expert counts C [P][E]: each
//               rank knows every buffer's layout, so it writes without asking
//   dispatch    row r of this rank's permutation (expert e = d L + l) goes
//               straight into rank d's input buffer at
//                 [expert l's region][source rank s's chunk][r's place]
//               (expert-major, source order inside an expert: the layout the
//               collectives' path builds), and the experts read it in place
//   combine     the experts write their outputs into an output buffer of the
//               same layout; each source reads its rows where they are and
//               sums each token's rows weighted (unpermute_rows_from), one
//               pass, with no copy back
//   backward    combine_backward writes prob * dy rows into the peers' input
//               buffers; dispatch_backward sums the input gradients from the
//               peers' output buffers
//
// y and dx are kept between batches too (a fresh 4 KiB page faults on first
// touch), so they are valid until this dispatcher's next batch, like the
// expert tensors.
//
// Synchronisation: the count all_gather completes only when every EP rank has
// entered this batch's dispatch, so every rank has finished with the last
// batch's buffers before anyone writes; a PeerMemory::sync() after each
// pass's writes makes them visible. Results equal the collectives' path bit
// for bit (same rows, same order of every sum).
#include <algorithm>
#include <numeric>

#include "harness/dtype.h"
#include "harness/error.h"
#include "harness/memory_use.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/moe/dispatcher.h"
#include "kernels/moe/dispatcher_common.h"
#include "kernels/moe/permute.h"

namespace sextant::moe {
namespace {

// The four buffers of a batch, each one PeerMemory of the same layout.
enum Buffer { fwd_in, fwd_out, bwd_in, bwd_out, kBuffers };

class PeerDispatcher : public TokenDispatcher {
 public:
  PeerDispatcher(Communicator& ep, int experts, const DispatchFaults& faults)
      : ep_(ep), experts_(experts), local_(experts / ep.size()), faults_(faults) {}

  std::vector<Tensor> dispatch(const Tensor& x, const Routing& routing) override {
    if (!x.is_host()) throw RuntimeError("moe dispatcher: peer memory holds host rows only");
    ScopedTimer watch(&stats_.dispatch_s, TimerClock::wall);
    stats_.peer_memory = true;
    slots_ = &routing.slots;
    dtype_ = x.dtype();
    h_ = x.dim(1);
    row_bytes_ = h_ * static_cast<int64_t>(dtype_size(dtype_));
    perm_ = group_by_expert(routing.slots, 0, experts_);
    {
      ScopedTimer comm(&stats_.comm_s, TimerClock::wall);
      exchange_counts();
    }
    layout();
    {
      ScopedTimer comm(&stats_.comm_s, TimerClock::wall);
      ScopedTimer rows(&stats_.dispatch_comm_s, TimerClock::wall);
      RowAddresses to = rows_in(fwd_in);
      if (faults_.neighbour_slot && to.rows.size() >= 2) to.rows[0] = to.rows[1];  // row 1 overwrites it next
      permute_rows_to(x, routing.slots, perm_, false, to);
      buffers_[fwd_in]->sync();
    }
    stats_.dispatch_recv_bytes = (own_rows() - from_self()) * row_bytes_;
    stats_.expert_rows = own_rows();
    return expert_views(fwd_in);
  }

  std::vector<Tensor> expert_outputs(bool backward) override { return expert_views(backward ? bwd_out : fwd_out); }

  Tensor combine(const std::vector<Tensor>& expert_out) override {
    ScopedTimer watch(&stats_.combine_s, TimerClock::wall);
    land(expert_out, fwd_out);
    stats_.combine_recv_bytes = (perm_.rows() - from_self()) * row_bytes_;
    ScopedTimer comm(&stats_.comm_s, TimerClock::wall);
    buffers_[fwd_out]->sync();
    const bool use_probs = !faults_.combine_without_probs;
    RowAddresses rows = rows_in(fwd_out);
    if (faults_.weights_before_exchange && ep_.rank() == 0 && use_probs) rows = weighted_copy(rows);
    Tensor& y = cache_.get("fwd.y", {slots_->tokens, h_}, dtype_);
    unpermute_rows_from(rows, *slots_, perm_, use_probs, faults_.unpermute_wrong_order, y);
    return y;
  }

  std::vector<Tensor> combine_backward(const Tensor& dy, std::vector<float>& dprob) override {
    const bool use_probs = !faults_.combine_without_probs;
    if (use_probs) accumulate_row_dots_from(dy, rows_in(fwd_out), *slots_, perm_, dprob);
    ScopedTimer comm(&stats_.comm_s, TimerClock::wall);
    permute_rows_to(dy, *slots_, perm_, use_probs, rows_in(bwd_in));
    buffers_[bwd_in]->sync();
    return expert_views(bwd_in);
  }

  Tensor dispatch_backward(const std::vector<Tensor>& d_expert_in) override {
    land(d_expert_in, bwd_out);
    ScopedTimer comm(&stats_.comm_s, TimerClock::wall);
    buffers_[bwd_out]->sync();
    Tensor& dx = cache_.get("bwd.dx", {slots_->tokens, h_}, dtype_);
    unpermute_rows_from(rows_in(bwd_out), *slots_, perm_, false, faults_.unpermute_wrong_order, dx);
    return dx;
  }

 private:
  int64_t count(int s, int e) const { return counts_[static_cast<size_t>(s) * experts_ + e]; }
  int64_t own_rows() const { return std::accumulate(expert_rows_.begin(), expert_rows_.end(), int64_t{0}); }
  // Rows this rank sends itself (and so gets back from itself in the combine).
  int64_t from_self() const {
    int64_t n = 0;
    for (int l = 0; l < local_; ++l) n += count(ep_.rank(), ep_.rank() * local_ + l);
    return n;
  }

  // Every rank's per-expert counts, on every rank. The planted fault
  // wrong_rank misstates this rank's counts (a row for the neighbour's rank).
  void exchange_counts() {
    const int p = ep_.size();
    std::vector<int64_t> mine = perm_.count;
    if (faults_.wrong_rank) move_one_row_to_neighbour(mine, p, local_);
    send_count_ = mine;
    std::vector<double> send(mine.begin(), mine.end()), all(static_cast<size_t>(p) * experts_);
    small_all_gather(ep_, send.data(), all.data(), send.size());
    counts_.assign(all.begin(), all.end());
  }

  // From the counts: where each of this rank's permuted rows lands (rank and
  // byte offset), each buffer's expert regions, and the buffers' size.
  void layout() {
    const int p = ep_.size(), me = ep_.rank();
    // base[d][l]: first row of expert l's region in rank d's buffers.
    std::vector<int64_t> base(static_cast<size_t>(p) * local_, 0), need(p, 0);
    for (int d = 0; d < p; ++d)
      for (int l = 0; l < local_; ++l) {
        base[d * local_ + l] = need[d];
        for (int s = 0; s < p; ++s) need[d] += count(s, d * local_ + l);
      }
    expert_rows_.assign(local_, 0);
    expert_base_.assign(local_, 0);
    for (int l = 0; l < local_; ++l) {
      expert_base_[l] = base[me * local_ + l];
      for (int s = 0; s < p; ++s) expert_rows_[l] += count(s, me * local_ + l);
    }
    dest_.clear();
    offset_.clear();
    for (int e = 0; e < experts_; ++e) {
      const int d = e / local_;
      int64_t at = base[e];  // this rank's chunk follows the lower ranks' chunks
      for (int s = 0; s < me; ++s) at += count(s, e);
      for (int64_t i = 0; i < send_count_[e]; ++i) {
        dest_.push_back(d);
        offset_.push_back((at + i) * row_bytes_);
      }
    }
    const size_t bytes = static_cast<size_t>(*std::max_element(need.begin(), need.end()) * row_bytes_);
    for (int i = 0; i < kBuffers; ++i)  // the same size on every rank: all grow together
      if (!buffers_[i] || buffers_[i]->bytes() < bytes) {
        buffers_[i] = ep_.peer_memory(bytes + bytes / 4);
        if (!buffers_[i])
          throw RuntimeError(cat("moe dispatcher: the EP ranks' peer memory (", bytes, " bytes per rank) was refused"));
        MemoryScope scope(MemoryKind::communication);
        charges_[i] = MemoryCharge(Device::host, buffers_[i]->bytes());  // this rank's part
      }
  }

  // This rank's permuted rows in buffer b (on their destination ranks).
  RowAddresses rows_in(Buffer b) {
    RowAddresses a{{}, dtype_, h_};
    a.rows.reserve(dest_.size());
    for (size_t r = 0; r < dest_.size(); ++r) a.rows.push_back(buffers_[b]->at(dest_[r]) + offset_[r]);
    return a;
  }

  // The local experts' regions of this rank's buffer b, as tensors.
  std::vector<Tensor> expert_views(Buffer b) {
    std::vector<Tensor> views;
    char* mine = buffers_[b]->at(ep_.rank());
    for (int l = 0; l < local_; ++l)
      views.push_back(Tensor::view_of(mine + expert_base_[l] * row_bytes_, {expert_rows_[l], h_}, dtype_, Device::host,
                                      buffers_[b]));
    return views;
  }

  // The experts' tensors into buffer b, unless they are its views already
  // (expert_outputs handed them out).
  void land(const std::vector<Tensor>& experts, Buffer b) {
    if (static_cast<int>(experts.size()) != local_)
      throw RuntimeError(cat("moe dispatcher: ", experts.size(), " expert tensors for ", local_, " local experts"));
    std::vector<Tensor> views = expert_views(b);
    for (int l = 0; l < local_; ++l)
      if (experts[l].raw() != views[l].raw()) views[l].copy_from(experts[l]);
  }

  // Planted fault weights_before_exchange: the rows weighted by their
  // probabilities on this side as well (a copy), so the combine weighs them twice.
  RowAddresses weighted_copy(const RowAddresses& rows) {
    weighted_ = Tensor::empty({perm_.rows(), h_}, dtype_);
    RowAddresses out{{}, dtype_, h_};
    ::sextant::dispatch(dtype_, [&](auto tag) {
      using T = decltype(tag);
      T* o = weighted_.data<T>();
      for (int64_t r = 0; r < perm_.rows(); ++r) {
        const float w = slots_->prob[perm_.slot[r]];
        const T* in = reinterpret_cast<const T*>(rows.rows[r]);
        for (int64_t i = 0; i < h_; ++i) o[r * h_ + i] = from_float<T>(w * static_cast<float>(to_float(in[i])));
        out.rows.push_back(reinterpret_cast<char*>(o + r * h_));
      }
    });
    return out;
  }

  Communicator& ep_;
  int experts_, local_;
  DispatchFaults faults_;
  const SlotTable* slots_ = nullptr;
  Permutation perm_;
  DType dtype_ = DType::f32;
  int64_t h_ = 0, row_bytes_ = 0;
  std::vector<int64_t> counts_;                     // [P * E]: rows rank s sends to expert e
  std::vector<int64_t> send_count_;                 // [E]: this rank's row of counts_ (as stated, faults included)
  std::vector<int> dest_;                           // [rows]: the rank each permuted row goes to
  std::vector<int64_t> offset_;                     // [rows]: its byte offset in that rank's buffers
  std::vector<int64_t> expert_rows_, expert_base_;  // [L]: this rank's expert regions (rows)
  std::shared_ptr<PeerMemory> buffers_[kBuffers];
  MemoryCharge charges_[kBuffers];  // each buffer's part on this rank, in the step's memory count
  Tensor weighted_;                 // planted fault weights_before_exchange only
  BufferCache cache_;               // y and dx, returned to the caller: the next batch reuses them
};

}  // namespace

std::unique_ptr<TokenDispatcher> make_peer_dispatcher(Communicator& ep, int experts, const DispatchFaults& faults) {
  return std::make_unique<PeerDispatcher>(ep, experts, faults);
}

}  // namespace sextant::moe
