// Gradient reduction and Adam for a model's parameter blocks, in buckets
// (Megatron's DDP: megatron/core/distributed/param_and_grad_buffer.py).
//
// Buckets: the units of the step (trained_param.h) in reverse order, the
// order the backward finishes them, fill buckets of one gradient group each (dense
// parameters: dp x cp, since the CP ranks hold other tokens of the same
// sequences; expert parameters: EDP, the replicas of an expert slice). A
// bucket closes once it holds at least bucket_mb MB of f32 gradients (0:
// every unit its own bucket). Each bucket is one packed buffer and one
// nonblocking collective on the parameters' device:
//   1. under SP, the gradients of parameters replicated over TP that saw only
//      this rank's sequence shard (LayerNorms, row-parallel biases, router)
//      are first all-reduced over TP;
//   2. the bucket is summed over its group.
// Without overlap each bucket is reduced after the backward, one after the
// other. With overlap_grad_reduce a bucket starts as soon as its units'
// gradients are final (gradients_final: the last microbatch's weight
// gradients were written, so under a pipeline after the last microbatch's
// backward of those layers), during the backward of earlier layers, and the
// pending collectives are tested at layer boundaries so that MPI progresses
// them. Either way a bucket is the same collective on the same bytes: the
// gradients are bit for bit those of the run without overlap.
//
// Adam (ops::adam_step) either on every block (plain), or as a distributed
// optimizer (ZeRO-1, Rajbhandari et al. 2020; Megatron's distributed
// optimizer): each bucket's gradient is reduce-scattered instead of
// all-reduced, each rank updates its 1/n slice of the bucket's packed
// parameters with the moments of that slice only, and the parameters are
// all-gathered back, bucket by bucket in forward order. With
// overlap_param_gather those gathers stay pending into the next step: the
// forward of a unit waits for its bucket's gather just before it reads the
// unit's parameters (before_forward).
#pragma once

#include <vector>

#include "harness/comm.h"
#include "kernels/data_parallel/trained_param.h"
#include "kernels/data_parallel/unit_hooks.h"
#include "kernels/ops/adam.h"

namespace sextant::dp {

// Planted faults in the reduction and the gathers (the step's fault table,
// kernels/model/step_faults.h, says which).
struct OptimizerFaults {
  bool skip_cp = false;            // dense gradients summed over dp only, not dp x cp
  bool experts_over_dp = false;    // expert gradients summed over the dense DP group instead of EDP
  bool skip_layernorm_tp = false;  // under SP, LayerNorm gradients not summed over TP
  bool unwaited_params = false;    // the forward reads parameters without waiting for their gather
};

struct OptimizerComms {
  Communicator* tp = nullptr;
  bool sp = false;
  Communicator* dp = nullptr;     // dense DP (used only by the planted faults)
  Communicator* dp_cp = nullptr;  // dense gradients
  Communicator* edp = nullptr;    // expert gradients
};

struct Overlap {
  bool grad_reduce = false;   // buckets reduced during the backward
  bool param_gather = false;  // distributed: parameter gathers pending into the next forward
};

struct OptimizerConfig {
  ops::AdamConfig adam;
  bool distributed = false;  // ZeRO-1: optimizer state sharded over the gradient groups
  Overlap overlap;
  double bucket_mb = 0;  // a bucket closes at this many MB of f32 gradients (0: one unit per bucket)
};

class Optimizer : public UnitHooks {
 public:
  Optimizer(TrainedSet params, const OptimizerComms& comms, const OptimizerConfig& config, OptimizerFaults faults);

  // Changes when buckets communicate (not what): between steps only.
  void set_overlap(Overlap overlap);
  const Overlap& overlap() const { return overlap_; }
  int bucket_count() const { return static_cast<int>(buckets_.size()); }
  // Buckets of the last backward whose reduction started inside it (overlap).
  int buckets_started_in_backward() const { return started_in_backward_; }

  // A new backward: no bucket's gradients are final yet.
  void begin_backward();
  void before_forward(int unit) override;   // waits for the unit's parameter gather
  void gradients_final(int unit) override;  // overlap: starts the buckets this completes
  void progress() override;                 // tests the pending collectives

  // Sums the accumulated gradients over their groups: starts the buckets
  // that have not started, waits for all. Distributed: each rank then holds
  // only its slice of every bucket's summed gradient.
  void reduce_gradients();
  // Distributed only (checks): all-gathers the gradient slices back into
  // every block's grad, so that every block holds its whole summed gradient.
  void gather_gradients();
  // One Adam step (t counts steps from 1) on the summed gradients.
  void step();
  // Waits for every pending parameter gather (and writes the parameters).
  void finish_param_gathers();
  // Checks: every block's value after the last step, in store order,
  // without completing pending gathers (so a forward that does not wait for
  // them still reads stale parameters, as it would without the check).
  std::vector<Tensor> parameter_values();
  // Zeroes the moments and the step count.
  void reset();
  int64_t steps() const { return t_; }

 private:
  struct Bucket {
    Communicator* group = nullptr;
    std::vector<TrainedParam*> params, tp_partial;  // tp_partial: summed over TP first (under SP)
    std::vector<int> units;
    int64_t numel = 0, padded = 0;                        // padded: a multiple of the group size
    Tensor grads;                                         // [padded] packed gradients, summed in place (plain)
    Tensor gathered;                                      // distributed: [padded] packed parameters
    Tensor grad_slice, param_slice, exp_avg, exp_avg_sq;  // distributed: [padded / n]
    int units_pending = 0;                                // this step: units whose gradients are not final yet
    bool started = false;
    RequestPtr reduce, gather;
  };
  void build_buckets(double bucket_mb);
  void close_bucket(Bucket& b);
  void start_reduce(Bucket& b);
  void finish_reduce(Bucket& b);
  void finish_gather(Bucket& b);
  void reduce_tp_partial(const Bucket& b);

  TrainedSet set_;
  OptimizerComms comms_;
  ops::AdamConfig adam_;
  bool distributed_;
  Overlap overlap_;
  OptimizerFaults faults_;
  std::vector<Bucket> buckets_;                 // in the order the backward finishes them
  std::vector<std::vector<int>> unit_buckets_;  // per unit: its buckets
  int started_in_backward_ = 0;
  int64_t t_ = 0;
};

}  // namespace sextant::dp
