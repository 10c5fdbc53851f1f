// Pipeline executor: runs a schedule on the PP communicator with real
// compute and nonblocking point-to-point messages, and records when every
// action started and ended.
//
//   StageCompute      what a stage computes (the suite plugs in its layers)
//   PipelineExecutor  order and messages: posts every receive of the step up
//                     front (irecv), waits for an action's input just before
//                     the action, sends each output as soon as it exists
//                     (isend, completed at the end of the step). These are
//                     the semantics validate() dry-runs, so a validated
//                     schedule cannot deadlock here.
//
// Messages: the activation that stage s sends to stage s+1 for microbatch mb
// has tag (0 * stages + s) * m + mb; the gradient stage s+1 sends back has
// tag (1 * stages + s) * m + mb. When both stages sit on one rank (the turn
// of a V) the tensor is handed over locally.
//
// Backends: mpi and mpi-staged (matching by peer and tag; mpi-staged moves
// device buffers, so the stages may compute on a GPU). nccl only at one PP
// rank (no messages): it ignores tags and orders p2p on one stream, so it
// needs grouped send/recv pairs and a rendezvous dry run; the constructor says so.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "harness/comm.h"
#include "harness/tensor.h"
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
  // Planted fault (for the suite's fault tests), "" for none:
  //   wrong_peer  rank 0 sends its first activation to the wrong rank
  std::string fault;
  // A host (MPI) communicator over the same ranks in the same order, for the
  // bookkeeping that moves host data (the plan check, gather). Null: pp
  // itself, which must then be a host communicator.
  Communicator* host = nullptr;
  static const std::vector<std::string>& faults();
};

class PipelineExecutor {
 public:
  // Collective over pp, whose size must equal schedule.ranks (this rank runs
  // schedule.actions[pp.rank()] and must hold the stages placed on it).
  // Validates the schedule (ScheduleError), then checks every rank's message
  // plan against every other's: each send has a matching receive (peer, tag,
  // size) and each receive a send (RuntimeError naming the first mismatch),
  // so a wrong peer is caught before anything runs instead of hanging.
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
  enum Kind { kActivation = 0, kGradient = 1 };
  // One message this rank sends or receives.
  struct Message {
    Kind kind;
    int stage;  // the boundary: output of `stage`, input of stage + 1
    int microbatch;
    int peer;
    int tag;
    size_t count;
  };
  // What action `step` of this rank consumes and produces.
  struct StepPlan {
    int recv = -1;  // index into recvs_, or -1 (none, or local)
    int send = -1;  // index into sends_, or -1
    bool consumes_local = false, produces_local = false;
  };
  using LocalKey = std::tuple<int, int, int>;  // kind, stage, microbatch

  void plan_messages();
  void check_plans_agree();
  int tag(Kind kind, int stage, int microbatch) const;
  Tensor input_for(int step, std::vector<RequestPtr>& receives);
  void hand_on(int step, const Tensor& output, std::vector<RequestPtr>& sends, std::vector<Tensor>& in_flight);
  Tensor run_action(const Action& action, const Tensor& input);

  Schedule schedule_;
  Communicator& pp_;
  Communicator& host_;  // options.host or pp
  StageCompute& compute_;
  ExecutorOptions options_;
  int rank_ = 0;
  std::vector<Message> sends_, recvs_;
  std::vector<StepPlan> plan_;      // per step of this rank
  std::vector<Tensor> recv_buffers_;  // per recvs_ entry, reused every step
  std::map<LocalKey, Tensor> local_;  // hand-offs between stages on this rank
};

}  // namespace sextant::pp
