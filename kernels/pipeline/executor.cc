#include "kernels/pipeline/executor.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "harness/error.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "kernels/pipeline/validate.h"

namespace sextant::pp {

Tensor StageCompute::backward(int stage, int microbatch, const Tensor& grad_output) {
  Tensor grad_input = backward_input(stage, microbatch, grad_output);
  backward_weight(stage, microbatch);
  return grad_input;
}

const std::vector<std::string>& ExecutorOptions::faults() {
  static const std::vector<std::string> names{"wrong_peer"};
  return names;
}

namespace {
using T = ActionType;
// MPI guarantees tags up to 32767 (MPI_TAG_UB >= 32767).
constexpr int kMaxTag = 32767;
}  // namespace

PipelineExecutor::PipelineExecutor(Schedule schedule, Communicator& pp, StageCompute& compute,
                                   ExecutorOptions options)
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
  // Posting every receive up front relies on MPI matching by (peer, tag).
  // NCCL ignores tags and runs p2p in stream order, so the same plan could
  // hang there; it needs grouped send/recv pairs (as Megatron batches them).
  // One rank sends nothing, so nccl serves there too.
  if (pp_.backend() == "nccl" && pp_.size() > 1)
    throw RuntimeError("pipeline executor: the nccl backend is not supported for --pp > 1 yet (tags are ignored "
                       "there); use mpi or mpi-staged (--comm staged)");
  if (host_.size() != pp_.size() || host_.rank() != pp_.rank() || host_.device() != Device::host)
    throw RuntimeError("pipeline executor: the host communicator must be a host communicator over the PP ranks");
  if (2L * schedule_.stages * schedule_.microbatches > kMaxTag + 1L)
    throw UsageError(cat("pipeline: 2 * stages * --microbatches = ", 2L * schedule_.stages * schedule_.microbatches,
                         " message tags exceed MPI's guaranteed ", kMaxTag + 1));
  const auto& faults = ExecutorOptions::faults();
  if (!options_.fault.empty() && std::find(faults.begin(), faults.end(), options_.fault) == faults.end())
    throw UsageError(cat("pipeline executor: unknown fault ", options_.fault));
  if (options_.fault == "wrong_peer" && schedule_.ranks < 2)
    throw UsageError("pipeline executor: fault wrong_peer needs --pp >= 2 (point-to-point messages)");
  plan_messages();
  check_plans_agree();
}

int PipelineExecutor::tag(Kind kind, int stage, int microbatch) const {
  return (kind * schedule_.stages + stage) * schedule_.microbatches + microbatch;
}

// For each action: where its input comes from and where its output goes.
// F(s) gets the activation of boundary s-1 and gives boundary s; B/I(s) gets
// the gradient of boundary s and gives the gradient of boundary s-1.
void PipelineExecutor::plan_messages() {
  const auto& actions = schedule_.actions[rank_];
  const auto& place = schedule_.stage_rank;
  plan_.assign(actions.size(), StepPlan{});
  bool misdirected = false;
  for (size_t t = 0; t < actions.size(); ++t) {
    const Action& a = actions[t];
    if (a.type == T::W) continue;
    const bool fwd = a.type == T::F;
    const Kind kind = fwd ? kActivation : kGradient;
    // Input: from the previous stage (forward) or the next one (backward).
    const int in_boundary = fwd ? a.stage - 1 : a.stage;
    const int in_stage = fwd ? a.stage - 1 : a.stage + 1;
    if (in_stage >= 0 && in_stage < schedule_.stages) {
      if (place[in_stage] == rank_) {
        plan_[t].consumes_local = true;
      } else {
        const size_t count = static_cast<size_t>(numel_of(compute_.boundary_shape(in_boundary)));
        recvs_.push_back({kind, in_boundary, a.microbatch, place[in_stage], tag(kind, in_boundary, a.microbatch),
                          count});
        plan_[t].recv = static_cast<int>(recvs_.size()) - 1;
      }
    }
    // Output: to the next stage (forward) or the previous one (backward).
    const int out_boundary = fwd ? a.stage : a.stage - 1;
    const int out_stage = fwd ? a.stage + 1 : a.stage - 1;
    if (out_stage >= 0 && out_stage < schedule_.stages) {
      if (place[out_stage] == rank_) {
        plan_[t].produces_local = true;
      } else {
        int peer = place[out_stage];
        if (options_.fault == "wrong_peer" && fwd && rank_ == 0 && !misdirected) {
          peer = (peer + 1) % schedule_.ranks;  // planted: the first activation goes astray
          misdirected = true;
        }
        const size_t count = static_cast<size_t>(numel_of(compute_.boundary_shape(out_boundary)));
        sends_.push_back({kind, out_boundary, a.microbatch, peer, tag(kind, out_boundary, a.microbatch), count});
        plan_[t].send = static_cast<int>(sends_.size()) - 1;
      }
    }
  }
  recv_buffers_.clear();
  for (const Message& m : recvs_)
    recv_buffers_.push_back(Tensor::empty(compute_.boundary_shape(m.stage), compute_.dtype(), pp_.device()));
}

namespace {
// (from, to, tag, count): one message as both ends must see it.
using Wire = std::tuple<int, int, int, size_t>;

std::string describe(const Wire& w, int stages, int m) {
  const auto& [from, to, tag, count] = w;
  const int kind = tag / (stages * m), stage = (tag / m) % stages, mb = tag % m;
  return cat(kind == 0 ? "the activation of stage " : "the gradient for stage ", stage, " microbatch ", mb, " (tag ",
             tag, ", ", count, " elements) from rank ", from, " to rank ", to);
}
}  // namespace

// Every rank's plan on every rank; all ranks reach the same verdict.
void PipelineExecutor::check_plans_agree() {
  std::ostringstream mine;
  for (const Message& m : sends_) mine << "s " << m.peer << " " << m.tag << " " << m.count << "\n";
  for (const Message& m : recvs_) mine << "r " << m.peer << " " << m.tag << " " << m.count << "\n";
  std::vector<std::string> plans = all_gather_strings(host_, mine.str());
  std::set<Wire> sent, expected;
  for (int r = 0; r < static_cast<int>(plans.size()); ++r) {
    std::istringstream in(plans[r]);
    std::string dir;
    int peer = 0, tag = 0;
    size_t count = 0;
    while (in >> dir >> peer >> tag >> count) {
      if (dir == "s") sent.insert({r, peer, tag, count});
      else expected.insert({peer, r, tag, count});
    }
  }
  const int S = schedule_.stages, m = schedule_.microbatches;
  for (const Wire& w : sent)
    if (!expected.count(w))
      throw RuntimeError(cat("pipeline executor: nobody receives ", describe(w, S, m), " (wrong peer?)"));
  for (const Wire& w : expected)
    if (!sent.count(w))
      throw RuntimeError(cat("pipeline executor: nobody sends ", describe(w, S, m), " (wrong peer?)"));
}

Tensor PipelineExecutor::input_for(int step, std::vector<RequestPtr>& receives) {
  const StepPlan& p = plan_[step];
  const Action& a = schedule_.actions[rank_][step];
  if (p.recv >= 0) {
    receives[p.recv]->wait();
    return recv_buffers_[p.recv];
  }
  if (!p.consumes_local) return Tensor{};
  const bool fwd = a.type == T::F;
  const LocalKey key{fwd ? kActivation : kGradient, fwd ? a.stage - 1 : a.stage, a.microbatch};
  auto it = local_.find(key);
  if (it == local_.end()) throw RuntimeError(cat("pipeline executor: no local input for ", to_string(a)));
  Tensor input = it->second;
  local_.erase(it);
  return input;
}

void PipelineExecutor::hand_on(int step, const Tensor& output, std::vector<RequestPtr>& sends,
                               std::vector<Tensor>& in_flight) {
  const StepPlan& p = plan_[step];
  const Action& a = schedule_.actions[rank_][step];
  if (p.send < 0 && !p.produces_local) return;
  if (!output.defined())
    throw RuntimeError(cat("pipeline executor: ", to_string(a), " returned no tensor for the next stage"));
  if (p.produces_local) {
    const bool fwd = a.type == T::F;
    local_[{fwd ? kActivation : kGradient, fwd ? a.stage : a.stage - 1, a.microbatch}] = output;
    return;
  }
  const Message& m = sends_[p.send];
  if (static_cast<size_t>(output.numel()) != m.count || output.dtype() != compute_.dtype())
    throw RuntimeError(cat("pipeline executor: ", to_string(a), " returned ", shape_string(output.shape()), " ",
                           dtype_name(output.dtype()), ", expected ", m.count, " elements of ",
                           dtype_name(compute_.dtype())));
  sends.push_back(pp_.isend(output.raw(), m.count, output.dtype(), m.peer, m.tag));
  in_flight.push_back(output);  // keeps the buffer alive until the send completes
}

Tensor PipelineExecutor::run_action(const Action& a, const Tensor& input) {
  switch (a.type) {
    case T::F: return compute_.forward(a.stage, a.microbatch, input);
    case T::B: return compute_.backward(a.stage, a.microbatch, input);
    case T::I: return compute_.backward_input(a.stage, a.microbatch, input);
    case T::W: compute_.backward_weight(a.stage, a.microbatch); return Tensor{};
  }
  return Tensor{};
}

std::vector<TimedAction> PipelineExecutor::run_step() {
  const auto& actions = schedule_.actions[rank_];
  local_.clear();
  pp_.barrier();
  const double t0 = now_seconds();
  std::vector<RequestPtr> receives;
  for (size_t i = 0; i < recvs_.size(); ++i)
    receives.push_back(pp_.irecv(recv_buffers_[i].raw(), recvs_[i].count, compute_.dtype(), recvs_[i].peer,
                                 recvs_[i].tag));
  std::vector<RequestPtr> sends;
  std::vector<Tensor> in_flight;
  std::vector<TimedAction> record;
  record.reserve(actions.size());
  for (int t = 0; t < static_cast<int>(actions.size()); ++t) {
    Tensor input = input_for(t, receives);
    const double start = now_seconds();
    Tensor output = run_action(actions[t], input);
    compute_.synchronize();
    record.push_back({actions[t], start - t0, now_seconds() - t0});
    hand_on(t, output, sends, in_flight);
  }
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
