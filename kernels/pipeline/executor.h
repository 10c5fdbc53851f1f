// Pipeline executor: runs a schedule on the PP communicator with real
// compute and nonblocking point-to-point messages, and records when every
// action started and ended.
//
//   StageCompute      what a stage computes (the suite plugs in its layers)
//   PipelineExecutor  order and messages: issues each send and receive in
//                     the order p2p_order() gives (a send right after the
//                     action that made it, a receive some steps before the
//                     action that needs it; what is issued at one point goes
//                     out as one group), waits for an action's input just
//                     before the action, and completes the sends at the end
//                     of the step.
//
// Messages: the activation that stage s sends to stage s+1 for microbatch mb
// has tag (0 * stages + s) * m + mb; the gradient stage s+1 sends back has
// tag (1 * stages + s) * m + mb. MPI matches by tag; NCCL ignores tags and
// matches in issue order, which p2p_order() makes agree on both ends. When
// both stages sit on one rank the tensor is handed over locally.
//
// Backends: mpi, mpi-staged (device buffers through host memory) and nccl.
// Before the first step every rank's plan is checked on every rank: each
// message has a sender and a receiver, and a dry run under NCCL's rules
// (in-order matching, one stream) finishes, so a bad plan is refused with a
// message instead of hanging.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "harness/comm.h"
#include "harness/tensor.h"
#include "kernels/pipeline/p2p_order.h"
#include "kernels/pipeline/pipeline_faults.h"
#include "kernels/pipeline/schedule.h"
#include "kernels/pipeline/timeline.h"

namespace sextant::pp {

// The stages one rank holds. The executor owns order and messages; the
// StageCompute owns weights, weight-gradient accumulators (summed over the
// microbatches of a step) and whatever (stage, microbatch) keeps between its
// F and its backward. Tensors passed in are the executor's: read them, do
// not modify them; they stay valid until the step ends.
class StageCompute {
 public:
  virtual ~StageCompute() = default;

  // Shape of what stage `stage` hands to stage + 1 (its output; the
  // gradient coming back has the same shape), in dtype().
  virtual Shape boundary_shape(int stage) const = 0;
  virtual DType dtype() const = 0;

  // F. input: the output of stage - 1 (undefined for stage 0, which reads its
  // own microbatch). Returns the output; the last stage computes the loss of
  // the microbatch and returns an undefined tensor.
  virtual Tensor forward(int stage, int microbatch, const Tensor& input) = 0;
  // I. grad_output: d loss / d output (undefined for the last stage, which
  // starts from its loss). Returns d loss / d input (undefined for stage 0).
  virtual Tensor backward_input(int stage, int microbatch, const Tensor& grad_output) = 0;
  // W. Adds d loss / d weights of the microbatch to the stage's gradients.
  virtual void backward_weight(int stage, int microbatch) = 0;
  // B. The full backward; by default I then W.
  virtual Tensor backward(int stage, int microbatch, const Tensor& grad_output);
  // Waits for asynchronous work (e.g. a CUDA stream) so that recorded end
  // times are true; nothing to do on the host.
  virtual void synchronize() {}
};

struct ExecutorOptions {
  // Planted fault (pipeline_faults.h): the executor acts on wrong_peer and
  // eager_receives, and ignores the others (the stages or the schedule carry them).
  Fault fault = Fault::none;
  // A host (MPI) communicator over the same ranks in the same order, for the
  // bookkeeping that moves host data (the plan check, gather). Null: pp
  // itself, which must then be a host communicator.
  Communicator* host = nullptr;
};

class PipelineExecutor {
 public:
  // Collective over pp, whose size must equal schedule.ranks (this rank runs
  // schedule.actions[pp.rank()] and must hold the stages placed on it).
  // Validates the schedule (ScheduleError), then checks every rank's message
  // plan against every other's: each send has a matching receive (peer, tag,
  // size) and each receive a send, and the order passes check_stream_order()
  // (RuntimeError naming the first mismatch or the stuck ranks), so a wrong
  // peer or order is caught before anything runs instead of hanging.
  PipelineExecutor(Schedule schedule, Communicator& pp, StageCompute& compute, ExecutorOptions options = {});

  // One step: this rank's actions in order (collective over pp). Returns
  // them with start and end in seconds since this rank's step start (taken
  // after a barrier). The compute's gradients accumulate; zeroing them
  // between steps is the caller's business.
  std::vector<TimedAction> run_step();

  // Collective: every rank's recorded actions, on every rank (over the host
  // communicator).
  Timeline gather(const std::vector<TimedAction>& mine);

  const Schedule& schedule() const { return schedule_; }

 private:
  // One send or receive of this rank, in issue order.
  struct Op {
    bool send = false;
    int peer = 0, tag = 0;
    size_t count = 0;
    int before_step = 0;  // issued just before this step (ops with equal steps: one group)
    int slot = 0;         // index into the step's receives or outgoing tensors
  };
  // What action `step` of this rank consumes and produces.
  struct StepPlan {
    int recv = -1;  // receive slot, or -1 (none, or local)
    int send = -1;  // outgoing slot, or -1
    bool consumes_local = false, produces_local = false;
  };
  using LocalKey = std::tuple<MessageKind, int, int>;  // kind, boundary, microbatch

  void plan_messages();
  void check_plans_agree();
  int tag(MessageKind kind, int boundary, int microbatch) const;
  std::string describe_tag(int tag) const;
  // Issues the ops due before `step` (from ops_[next] on) as one group.
  void issue_ops(int step, size_t& next, std::vector<RequestPtr>& receives, std::vector<RequestPtr>& sends,
                 const std::vector<Tensor>& outgoing);
  Tensor input_for(int step, std::vector<RequestPtr>& receives);
  void hand_on(int step, const Tensor& output, std::vector<Tensor>& outgoing);
  Tensor run_action(const Action& action, const Tensor& input);

  Schedule schedule_;
  Communicator& pp_;
  Communicator& host_;  // options.host or pp
  StageCompute& compute_;
  ExecutorOptions options_;
  int rank_ = 0;
  std::vector<Op> ops_;  // this rank's sends and receives, in issue order
  int send_slots_ = 0;
  std::vector<StepPlan> plan_;        // per step of this rank
  std::vector<Tensor> recv_buffers_;  // per receive slot, reused every step
  std::map<LocalKey, Tensor> local_;  // hand-offs between stages on this rank
};

}  // namespace sextant::pp
