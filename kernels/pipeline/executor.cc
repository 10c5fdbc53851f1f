#include "kernels/pipeline/executor.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/memory_use.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/pipeline/validate.h"

namespace sextant::pp {

Tensor StageCompute::backward(int stage, int microbatch, const Tensor& grad_output) {
  Tensor grad_input = backward_input(stage, microbatch, grad_output);
  backward_weight(stage, microbatch);
  return grad_input;
}

namespace {
using T = ActionType;
// MPI guarantees tags up to 32767 (MPI_TAG_UB >= 32767).
constexpr int kMaxTag = 32767;
}  // namespace

PipelineExecutor::PipelineExecutor(Schedule schedule, Communicator& pp, StageCompute& compute, ExecutorOptions options)
    : schedule_(std::move(schedule)),
      pp_(pp),
      host_(options.host ? *options.host : pp),
      compute_(compute),
      options_(std::move(options)),
      rank_(pp.rank()) {
  validate(schedule_);
  if (pp_.size() != schedule_.ranks)
    throw UsageError(cat("pipeline: the PP group has ", pp_.size(), " ranks but schedule ", schedule_.name,
                         " is for --pp ", schedule_.ranks));
  if (host_.size() != pp_.size() || host_.rank() != pp_.rank() || host_.device() != Device::host)
    throw RuntimeError("pipeline executor: the host communicator must be a host communicator over the PP ranks");
  if (2L * schedule_.stages * schedule_.microbatches > kMaxTag + 1L)
    throw UsageError(cat("pipeline: 2 * stages * --microbatches = ", 2L * schedule_.stages * schedule_.microbatches,
                         " message tags exceed MPI's guaranteed ", kMaxTag + 1));
  if (!faults().shows(options_.fault, {schedule_.ranks, schedule_.microbatches}))
    throw UsageError(cat("pipeline executor: fault ", faults().name(options_.fault), " needs ",
                         faults().row(options_.fault).shows_when));
  plan_messages();
  check_plans_agree();
}

int PipelineExecutor::tag(MessageKind kind, int boundary, int microbatch) const {
  return (static_cast<int>(kind) * schedule_.stages + boundary) * schedule_.microbatches + microbatch;
}

std::string PipelineExecutor::describe_tag(int tag) const {
  const int S = schedule_.stages, m = schedule_.microbatches;
  const int kind = tag / (S * m), boundary = (tag / m) % S, mb = tag % m;
  return cat(kind == 0 ? "the activation of stage " : "the gradient for stage ", boundary, " microbatch ", mb, " (tag ",
             tag, ")");
}

// This rank's part of the step's messages, in p2p_order(), and for each
// action whether its input and output are handed over on this rank.
void PipelineExecutor::plan_messages() {
  const auto& actions = schedule_.actions[rank_];
  const auto& place = schedule_.stage_rank;
  plan_.assign(actions.size(), StepPlan{});
  auto here = [&](int stage) { return stage >= 0 && stage < schedule_.stages && place[stage] == rank_; };
  for (size_t t = 0; t < actions.size(); ++t) {
    if (actions[t].type == T::W) continue;
    plan_[t].consumes_local = here(input_crossing(actions[t]).peer_stage);
    plan_[t].produces_local = here(output_crossing(actions[t]).peer_stage);
  }
  const std::vector<Message> messages = step_messages(schedule_);
  ops_.clear();
  recv_buffers_.clear();
  MemoryScope scope(MemoryKind::communication);  // one receive buffer per message of the step
  send_slots_ = 0;
  bool misdirected = false;
  const std::vector<std::vector<P2pOp>> order = p2p_order(schedule_, messages);
  for (const P2pOp& p : order[rank_]) {
    const Message& m = messages[p.message];
    Op op{p.send,
          p.send ? m.to : m.from,
          tag(m.kind, m.boundary, m.microbatch),
          static_cast<size_t>(numel_of(compute_.boundary_shape(m.boundary))),
          p.before_step,
          0};
    if (p.send) {
      if (options_.fault == Fault::wrong_peer && m.kind == MessageKind::activation && !misdirected) {
        op.peer = (op.peer + 1) % schedule_.ranks;  // planted: the first activation goes astray
        misdirected = true;
      }
      op.slot = plan_[m.produced_at].send = send_slots_++;
    } else {
      op.slot = plan_[m.consumed_at].recv = static_cast<int>(recv_buffers_.size());
      recv_buffers_.push_back(Tensor::empty(compute_.boundary_shape(m.boundary), compute_.dtype(), pp_.device()));
      if (options_.fault == Fault::eager_receives) op.before_step = 0;  // planted: the tag-matching order of old
    }
    ops_.push_back(op);
  }
  std::stable_sort(ops_.begin(), ops_.end(), [](const Op& a, const Op& b) { return a.before_step < b.before_step; });
}

// Every rank's plan on every rank; all ranks reach the same verdict.
void PipelineExecutor::check_plans_agree() {
  std::ostringstream mine;
  for (const Op& op : ops_)
    mine << (op.send ? "s " : "r ") << op.peer << " " << op.tag << " " << op.count << " " << op.before_step << "\n";
  std::vector<std::string> plans = all_gather_strings(host_, mine.str());
  // (from, to, tag, count): one message as both ends must see it.
  using Wire = std::tuple<int, int, int, size_t>;
  std::set<Wire> sent, expected;
  std::vector<std::vector<WireOp>> wire(plans.size());
  for (int r = 0; r < static_cast<int>(plans.size()); ++r) {
    std::istringstream in(plans[r]);
    std::string dir;
    WireOp op;
    while (in >> dir >> op.peer >> op.tag >> op.count >> op.before_step) {
      op.send = dir == "s";
      if (op.send) sent.insert({r, op.peer, op.tag, op.count});
      else expected.insert({op.peer, r, op.tag, op.count});
      wire[r].push_back(op);
    }
  }
  auto describe = [&](const Wire& w) {
    const auto& [from, to, tag, count] = w;
    return cat(describe_tag(tag), ", ", count, " elements, from rank ", from, " to rank ", to);
  };
  for (const Wire& w : sent)
    if (!expected.count(w))
      throw RuntimeError(cat("pipeline executor: nobody receives ", describe(w), " (wrong peer?)"));
  for (const Wire& w : expected)
    if (!sent.count(w)) throw RuntimeError(cat("pipeline executor: nobody sends ", describe(w), " (wrong peer?)"));
  check_stream_order(wire, [this](int tag) { return describe_tag(tag); });
}

void PipelineExecutor::issue_ops(int step, size_t& next, std::vector<RequestPtr>& receives,
                                 std::vector<RequestPtr>& sends, const std::vector<Tensor>& outgoing) {
  if (next >= ops_.size() || ops_[next].before_step > step) return;
  pp_.group_start();
  for (; next < ops_.size() && ops_[next].before_step <= step; ++next) {
    const Op& op = ops_[next];
    if (op.send) {
      const Tensor& t = outgoing[op.slot];
      if (!t.defined())
        throw RuntimeError(cat("pipeline executor: ", describe_tag(op.tag), " sent before it was made"));
      sends.push_back(pp_.isend(t.raw(), op.count, t.dtype(), op.peer, op.tag));
    } else {
      receives[op.slot] = pp_.irecv(recv_buffers_[op.slot].raw(), op.count, compute_.dtype(), op.peer, op.tag);
    }
  }
  pp_.group_end();
}

Tensor PipelineExecutor::input_for(int step, std::vector<RequestPtr>& receives) {
  const StepPlan& p = plan_[step];
  const Action& a = schedule_.actions[rank_][step];
  if (p.recv >= 0) {
    if (!receives[p.recv])
      throw RuntimeError(cat("pipeline executor: the input of ", to_string(a), " was never received"));
    receives[p.recv]->wait();
    return recv_buffers_[p.recv];
  }
  if (!p.consumes_local) return Tensor{};
  const Crossing in = input_crossing(a);
  auto it = local_.find({in.kind, in.boundary, a.microbatch});
  if (it == local_.end()) throw RuntimeError(cat("pipeline executor: no local input for ", to_string(a)));
  Tensor input = it->second;
  local_.erase(it);
  return input;
}

// Keeps the output for the stage that needs it: locally, or until its send
// is issued (and, held in `outgoing`, until the send completes).
void PipelineExecutor::hand_on(int step, const Tensor& output, std::vector<Tensor>& outgoing) {
  const StepPlan& p = plan_[step];
  const Action& a = schedule_.actions[rank_][step];
  if (p.send < 0 && !p.produces_local) return;
  if (!output.defined())
    throw RuntimeError(cat("pipeline executor: ", to_string(a), " returned no tensor for the next stage"));
  const Crossing out = output_crossing(a);
  if (p.produces_local) {
    local_[{out.kind, out.boundary, a.microbatch}] = output;
    return;
  }
  const size_t count = static_cast<size_t>(numel_of(compute_.boundary_shape(out.boundary)));
  if (static_cast<size_t>(output.numel()) != count || output.dtype() != compute_.dtype())
    throw RuntimeError(cat("pipeline executor: ", to_string(a), " returned ", shape_string(output.shape()), " ",
                           dtype_name(output.dtype()), ", expected ", count, " elements of ",
                           dtype_name(compute_.dtype())));
  outgoing[p.send] = output;
}

Tensor PipelineExecutor::run_action(const Action& a, const Tensor& input) {
  const bool skip_weight =
      kernel_fault_planted(KernelFault::pipeline_skip_weight_grad) && a.microbatch == schedule_.microbatches - 1;
  switch (a.type) {
    case T::F: return compute_.forward(a.stage, a.microbatch, input);
    case T::B:
      return skip_weight ? compute_.backward_input(a.stage, a.microbatch, input)
                         : compute_.backward(a.stage, a.microbatch, input);
    case T::I: return compute_.backward_input(a.stage, a.microbatch, input);
    case T::W:
      if (!skip_weight) compute_.backward_weight(a.stage, a.microbatch);
      return Tensor{};
  }
  return Tensor{};
}

std::vector<TimedAction> PipelineExecutor::run_step() {
  const auto& actions = schedule_.actions[rank_];
  local_.clear();
  pp_.barrier();
  const double t0 = now_seconds();
  std::vector<RequestPtr> receives(recv_buffers_.size()), sends;
  std::vector<Tensor> outgoing(static_cast<size_t>(send_slots_));  // alive until the sends complete
  std::vector<TimedAction> record;
  record.reserve(actions.size());
  size_t next_op = 0;
  const int steps = static_cast<int>(actions.size());
  for (int t = 0; t < steps; ++t) {
    issue_ops(t, next_op, receives, sends, outgoing);
    Tensor input = input_for(t, receives);
    const double start = now_seconds();
    Tensor output = run_action(actions[t], input);
    compute_.synchronize();
    record.push_back({actions[t], start - t0, now_seconds() - t0});
    hand_on(t, output, outgoing);
  }
  issue_ops(steps, next_op, receives, sends, outgoing);
  wait_all(sends);
  if (!local_.empty()) throw RuntimeError("pipeline executor: a local hand-off was never consumed");
  return record;
}

Timeline PipelineExecutor::gather(const std::vector<TimedAction>& mine) {
  const size_t steps = schedule_.max_steps();
  std::vector<double> times(2 * steps, 0.0), all(2 * steps * static_cast<size_t>(schedule_.ranks));
  for (size_t t = 0; t < mine.size() && t < steps; ++t) times[2 * t] = mine[t].start, times[2 * t + 1] = mine[t].end;
  host_.all_gather(times.data(), all.data(), times.size(), DType::f64);
  Timeline timeline;
  timeline.ranks.resize(static_cast<size_t>(schedule_.ranks));
  for (int r = 0; r < schedule_.ranks; ++r) {
    const auto& actions = schedule_.actions[r];
    for (size_t t = 0; t < actions.size(); ++t) {
      const double* at = all.data() + 2 * (r * steps + t);
      timeline.ranks[r].push_back({actions[t], at[0], at[1]});
    }
  }
  return timeline;
}

}  // namespace sextant::pp
