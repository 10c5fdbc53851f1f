// Gradient reduction and Adam for the GPT's parameter blocks.
//
// Reduction, after the pipeline has summed every microbatch into the
// accumulators (what Megatron's DDP does after the last backward):
//   1. under SP, the gradients of parameters replicated over TP that saw only
//      this rank's sequence shard (LayerNorms, row-parallel biases, router)
//      are all-reduced over TP;
//   2. dense parameters are summed over dp x cp (the CP ranks hold other
//      tokens of the same sequences: dp=2 cp=4 must equal dp=8), expert
//      parameters over EDP (the replicas of an expert slice).
// Each group is one packed buffer (a bucket) and one collective, on the
// store's device (device buffers through the communicators; Adam on device).
//
// Adam (ops::adam_step) either on every block (plain), or as a distributed
// optimizer (ZeRO-1, Rajbhandari et al. 2020; Megatron's distributed
// optimizer): each bucket's gradient is reduce-scattered instead of
// all-reduced, each rank updates its 1/n slice of the packed parameters with
// the moments of that slice only, and the parameters are all-gathered back.
#pragma once

#include <vector>

#include "harness/comm.h"
#include "kernels/model/param_store.h"
#include "kernels/ops/adam.h"

namespace sextant::model {

// Planted faults in the reduction (see StepFaults).
struct ReduceFaults {
  bool skip_cp = false;            // dense gradients summed over dp only, not dp x cp
  bool experts_over_dp = false;    // expert gradients summed over the dense DP group instead of EDP
  bool skip_layernorm_tp = false;  // under SP, LayerNorm gradients not summed over TP
};

struct OptimizerComms {
  Communicator* tp = nullptr;
  bool sp = false;
  Communicator* dp = nullptr;     // dense DP (used only by the planted faults)
  Communicator* dp_cp = nullptr;  // dense gradients
  Communicator* edp = nullptr;    // expert gradients
};

class Optimizer {
 public:
  Optimizer(ParamStore& store, const OptimizerComms& comms, const ops::AdamConfig& adam, bool distributed,
            ReduceFaults faults);

  // Sums the accumulated gradients over their groups. Distributed: each rank
  // then holds only its slice of every bucket's summed gradient.
  void reduce_gradients();
  // Distributed only (checks): all-gathers the gradient slices back into
  // every block's grad, so that every block holds its whole summed gradient.
  void gather_gradients();
  // One Adam step (t counts steps from 1) on the summed gradients.
  void step();
  // Zeroes the moments and the step count.
  void reset();
  int64_t steps() const { return t_; }

 private:
  struct Bucket {
    Communicator* group = nullptr;
    std::vector<Param*> params;
    int64_t numel = 0, padded = 0;                        // padded: a multiple of the group size
    Tensor grad_slice, param_slice, exp_avg, exp_avg_sq;  // distributed: [padded / n]
  };
  void pack(const Bucket& b, bool grads, Tensor& flat) const;
  void unpack(const Bucket& b, bool grads, const Tensor& flat);
  void reduce_tp_replicated();

  ParamStore& store_;
  OptimizerComms comms_;
  ops::AdamConfig adam_;
  bool distributed_;
  ReduceFaults faults_;
  std::vector<Bucket> buckets_;
  int64_t t_ = 0;
};

}  // namespace sextant::model
