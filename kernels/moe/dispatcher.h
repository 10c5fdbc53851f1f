// Token dispatchers: move each token to the ranks that hold its experts and
// bring the expert outputs back (Megatron moe/token_dispatcher.py).
//
//   alltoall   count exchange (all_to_all of per-expert counts over EP),
//              permute (rows grouped by expert), all_to_all_v of the rows over
//              EP, all-gather-v over ETP, sort by local expert; combine runs
//              the inverse path (reduce-scatter-v over ETP, all_to_all_v back)
//              and unpermutes, weighting each row by its probability. Without
//              ETP the rows move in one all_to_all_v per local expert, straight
//              into the expert's tensor (no sort copy).
//   allgather  all-gather every token and its routing over EP then ETP, keep
//              the rows of local experts, and reduce-scatter the weighted
//              partial outputs back over ETP then EP.
//
// The ETP collectives move uneven row counts; the Communicator's all_gather
// and reduce_scatter need equal blocks, so the all-gather-v is an
// all_to_all_v that sends the whole buffer to every peer, and the
// reduce-scatter-v an all_to_all_v of each peer's rows followed by a sum in
// peer order (the same traffic as a ring reduce-scatter).
//
// Backward reuses the paths: combine_backward sends prob * dy along the
// dispatch path, dispatch_backward sends the input gradients along the
// combine path and sums a token's rows.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/comm.h"
#include "kernels/moe/moe_types.h"
#include "kernels/moe/router.h"

namespace sextant::moe {

struct DispatchComms {
  Communicator* ep = nullptr;   // expert-parallel group: experts are sharded over it
  Communicator* etp = nullptr;  // expert tensor-parallel group: each expert's FFN is split over it
};

// Planted faults a dispatcher understands (moe_faults.h).
struct DispatchFaults {
  bool wrong_rank = false;               // alltoall: one row per rank goes to the neighbour of its expert's rank
  bool combine_without_probs = false;    // combine sums expert outputs without the routing probabilities
  bool unpermute_wrong_order = false;    // unpermute takes the grouped rows for token-ordered ones
  bool neighbour_slot = false;           // peer memory: a rank's first row lands in its neighbour row's slot
  bool weights_before_exchange = false;  // peer memory: EP rank 0 weighs its rows before the exchange too
};

// What the last forward and backward did on this rank (wall seconds).
struct DispatchStats {
  double dispatch_s = 0;            // forward dispatch: count exchange, permute, collectives, sort
  double combine_s = 0;             // forward combine: unsort, collectives, unpermute
  double comm_s = 0;                // inside the token collectives, forward and backward
  double dispatch_comm_s = 0;       // of which: the forward dispatch's row collectives (no count exchange)
  int64_t dispatch_recv_bytes = 0;  // token rows landing in this rank's buffers in the forward dispatch
  int64_t combine_recv_bytes = 0;   // the same for the forward combine
  int64_t expert_rows = 0;          // rows the local experts process (after the ETP gather)
  bool peer_memory = false;         // the rows moved through peer memory (Transport)
};

// One batch is in flight per dispatcher: dispatch, combine, combine_backward
// and dispatch_backward of a batch run in this order, and the next dispatch
// reuses the buffers (the expert tensors it returned included, and on the
// host the outputs of combine and dispatch_backward of the alltoall kind).
class TokenDispatcher {
 public:
  virtual ~TokenDispatcher() = default;
  // x: [T, h] this rank's tokens -> the rows of each local expert, [n_l, h].
  virtual std::vector<Tensor> dispatch(const Tensor& x, const Routing& routing) = 0;
  // Expert outputs [n_l, h] (partial sums over ETP) -> y: [T, h],
  // y_t = sum over t's kept slots of prob * expert output.
  virtual Tensor combine(const std::vector<Tensor>& expert_out) = 0;
  // dy: [T, h] -> gradient of each expert output [n_l, h]; adds dLoss/dprob to dprob [T * k].
  virtual std::vector<Tensor> combine_backward(const Tensor& dy, std::vector<float>& dprob) = 0;
  // Gradient of each expert input [n_l, h] (partial over ETP) -> dx: [T, h].
  virtual Tensor dispatch_backward(const std::vector<Tensor>& d_expert_in) = 0;
  // Where the local experts should write their outputs (forward) or input
  // gradients (backward) of the batch in flight, after its dispatch or
  // combine_backward: tensors [n_l, h] that combine / dispatch_backward read
  // in place, or none where any tensor will do. Other tensors work too, at
  // the cost of a copy.
  virtual std::vector<Tensor> expert_outputs(bool /*backward*/) { return {}; }

  const DispatchStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 protected:
  DispatchStats stats_;
};

// experts: E of the layer (E / ep of them local).
// transport: alltoall only; peer_memory is taken where it can be (collective
// over EP: every EP rank makes its dispatcher at the same point).
std::unique_ptr<TokenDispatcher> make_dispatcher(DispatcherKind kind, const DispatchComms& comms, int experts,
                                                 const DispatchFaults& faults,
                                                 Transport transport = Transport::peer_memory);
// The two kinds make_dispatcher chooses from (alltoall_dispatcher.cc, allgather_dispatcher.cc),
// and alltoall's transport over peer memory (peer_dispatcher.cc).
std::unique_ptr<TokenDispatcher> make_alltoall_dispatcher(const DispatchComms& comms, int experts,
                                                          const DispatchFaults& faults);
std::unique_ptr<TokenDispatcher> make_peer_dispatcher(Communicator& ep, int experts, const DispatchFaults& faults);
std::unique_ptr<TokenDispatcher> make_allgather_dispatcher(const DispatchComms& comms, int experts,
                                                           const DispatchFaults& faults);

}  // namespace sextant::moe
