// The MoE layer over the expert layout ETP x EP x EDP of the rank grid:
//
//   y = sum over t's kept slots (e, p) of p * expert_e(x_t)     x, y: [T, h] per rank
//
// Every rank holds its own tokens. The router (router.h) runs on them; the
// dispatcher (dispatcher.h) moves their rows to the EP rank of each expert and
// gathers them over ETP; the experts (experts.h) run their FFN slice; the
// combine brings the outputs back weighted by the probabilities.
//
// Backward: the loss is L = <dy, y> + aux loss + z loss. Expert weight
// gradients are summed over EDP (the replicas of the same expert slice, which
// saw different tokens); the router weight gradient over the token group.
#pragma once

#include <string>
#include <vector>

#include "harness/comm.h"
#include "harness/tensor.h"
#include "kernels/moe/dispatcher.h"
#include "kernels/moe/experts.h"
#include "kernels/moe/moe_faults.h"
#include "kernels/moe/router.h"

namespace sextant::moe {

struct MoeOptions {
  RouterOptions router;
  DispatcherKind dispatcher = DispatcherKind::alltoall;
  Transport transport = Transport::peer_memory;
  Fault fault = Fault::none;  // planted (moe_faults.h)
};

struct MoeComms {
  Communicator* tokens = nullptr;  // every rank holding tokens of the batch: router statistics and gradient
  Communicator* ep = nullptr;
  Communicator* etp = nullptr;
  Communicator* edp = nullptr;
};

// One rank's parameters, in the storage dtype.
struct MoeWeights {
  Tensor router;           // [h, E], replicated
  std::vector<Tensor> w1;  // per local expert: [h, ffn / etp], columns etp_rank * ffn / etp onward
  std::vector<Tensor> w2;  // per local expert: [ffn / etp, h], the matching rows
};

struct MoeGrads {
  Tensor dx;               // [T, h]
  Tensor router;           // [h, E] (summed over the token group)
  std::vector<Tensor> w1;  // shapes of MoeWeights (summed over EDP)
  std::vector<Tensor> w2;
};

// Wall seconds of this rank's last forward + backward, by part.
struct MoeTimes {
  double forward_s = 0, backward_s = 0;
  double router_s = 0;       // routing, capacity, router gradient
  double experts_s = 0;      // expert forward and backward
  double grad_reduce_s = 0;  // EDP and token-group gradient all-reduces
  double expert_flops = 0;   // of the expert gemms, forward + backward
  DispatchStats dispatch;
};

class MoeLayer {
 public:
  MoeLayer(const MoeOptions& options, const MoeComms& comms, MoeWeights weights);

  // x: [T, h] this rank's tokens -> y: [T, h]. Keeps what backward needs.
  Tensor forward(const Tensor& x);
  // dy: [T, h], after forward.
  MoeGrads backward(const Tensor& dy);

  const Routing& routing() const { return routing_; }
  const MoeTimes& times() const { return times_; }
  const MoeWeights& weights() const { return weights_; }

 private:
  Tensor router_input_grad(const Tensor& dlogits, Tensor dx);
  void reduce_expert_grads(std::vector<Tensor>& dw1, std::vector<Tensor>& dw2);

  MoeOptions options_;
  MoeComms comms_;
  MoeWeights weights_;
  std::unique_ptr<TokenDispatcher> dispatcher_;
  Tensor x_;
  Routing routing_;
  std::vector<ExpertSaved> saved_;
  MoeTimes times_;
};

}  // namespace sextant::moe
