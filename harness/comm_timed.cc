#include "harness/comm_wrappers.h"

#include "harness/timing.h"

namespace sextant {

namespace {

// A call, test or wait: exposed; with `communication`, also an interval of
// communication (nonblocking collectives count theirs from start to completion).
class Span {
 public:
  Span(CommClock& clock, bool communication) : clock_(clock), communication_(communication), start_(now_seconds()) {
    if (communication_) clock_.begin(start_);
  }
  ~Span() {
    const double end = now_seconds();
    clock_.exposed += end - start_;
    if (communication_) clock_.end(end);
  }

 private:
  CommClock& clock_;
  bool communication_;
  double start_;
};

// Point-to-point: posting and waiting are communication and exposed (or, for
// receives whose waits the clock keeps apart, input waits).
class TimedRequest : public Request {
 public:
  TimedRequest(RequestPtr inner, CommClock& clock, bool input_wait)
      : inner_(std::move(inner)), clock_(clock), input_wait_(input_wait) {}
  void wait() override {
    if (input_wait_) {
      ScopedTimer watch(&clock_.input_wait, TimerClock::wall);
      return inner_->wait();
    }
    Span span(clock_, true);
    inner_->wait();
  }
  bool test() override {
    if (input_wait_) {
      ScopedTimer watch(&clock_.input_wait, TimerClock::wall);
      return inner_->test();
    }
    Span span(clock_, true);
    return inner_->test();
  }

 private:
  RequestPtr inner_;
  CommClock& clock_;
  bool input_wait_;
};

// A nonblocking collective: communication from its start until seen
// complete; exposed inside its start, tests and wait.
class TimedCollective : public Request {
 public:
  explicit TimedCollective(CommClock& clock) : clock_(clock) { clock_.begin(now_seconds()); }
  ~TimedCollective() override {
    try {
      wait();
    } catch (...) {
      // A destructor must not throw; the error surfaced (or will) elsewhere.
    }
  }
  void start(RequestPtr inner) { inner_ = std::move(inner); }
  void wait() override {
    if (done_) return;
    if (inner_) {
      Span span(clock_, false);
      inner_->wait();
    }
    complete();
  }
  bool test() override {
    if (done_) return true;
    bool finished = false;
    {
      Span span(clock_, false);
      finished = inner_->test();
    }
    if (finished) complete();
    return finished;
  }

 private:
  void complete() {
    done_ = true;
    clock_.end(now_seconds());
  }
  CommClock& clock_;
  bool done_ = false;
  RequestPtr inner_;
};

// Base-from-member: the owned split must exist before the wrapper refers to it.
struct OwnedInner {
  std::unique_ptr<Communicator> owned;
};
class OwningTimedCommunicator : private OwnedInner, public TimedCommunicator {
 public:
  OwningTimedCommunicator(std::unique_ptr<Communicator> inner, CommClock& clock)
      : OwnedInner{std::move(inner)}, TimedCommunicator(*owned, clock) {}
};

}  // namespace

std::unique_ptr<Communicator> TimedCommunicator::split(int color, int key) {
  std::unique_ptr<Communicator> inner = inner_.split(color, key);
  if (!inner) return nullptr;
  return std::make_unique<OwningTimedCommunicator>(std::move(inner), clock_);
}

void TimedCommunicator::all_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) {
  Span span(clock_, true);
  ++clock_.calls;
  inner_.all_reduce(s, r, n, t, op);
}
void TimedCommunicator::reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) {
  Span span(clock_, true);
  ++clock_.calls;
  inner_.reduce_scatter(s, r, n, t, op);
}
void TimedCommunicator::all_gather(const void* s, void* r, size_t n, DType t) {
  Span span(clock_, true);
  ++clock_.calls;
  inner_.all_gather(s, r, n, t);
}
void TimedCommunicator::all_to_all(const void* s, void* r, size_t n, DType t) {
  Span span(clock_, true);
  ++clock_.calls;
  inner_.all_to_all(s, r, n, t);
}
void TimedCommunicator::all_to_all_v(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd,
                                     void* r, const std::vector<size_t>& rc, const std::vector<size_t>& rd, DType t) {
  Span span(clock_, true);
  ++clock_.calls;
  inner_.all_to_all_v(s, sc, sd, r, rc, rd, t);
}
void TimedCommunicator::broadcast(void* b, size_t n, DType t, int root) {
  Span span(clock_, true);
  ++clock_.calls;
  inner_.broadcast(b, n, t, root);
}
void TimedCommunicator::barrier() {
  Span span(clock_, true);
  ++clock_.calls;
  inner_.barrier();
}

namespace {
// Starts a nonblocking collective under a TimedCollective: its start is exposed.
template <class Start>
RequestPtr timed_collective(CommClock& clock, Start start) {
  ++clock.calls;
  auto request = std::make_unique<TimedCollective>(clock);
  {
    Span span(clock, false);
    request->start(start());
  }
  return request;
}
}  // namespace

RequestPtr TimedCommunicator::iall_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) {
  return timed_collective(clock_, [&] { return inner_.iall_reduce(s, r, n, t, op); });
}
RequestPtr TimedCommunicator::ireduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) {
  return timed_collective(clock_, [&] { return inner_.ireduce_scatter(s, r, n, t, op); });
}
RequestPtr TimedCommunicator::iall_gather(const void* s, void* r, size_t n, DType t) {
  return timed_collective(clock_, [&] { return inner_.iall_gather(s, r, n, t); });
}

RequestPtr TimedCommunicator::isend(const void* b, size_t n, DType t, int peer, int tag) {
  Span span(clock_, true);
  ++clock_.calls;
  return std::make_unique<TimedRequest>(inner_.isend(b, n, t, peer, tag), clock_, false);
}
RequestPtr TimedCommunicator::irecv(void* b, size_t n, DType t, int peer, int tag) {
  Span span(clock_, true);
  ++clock_.calls;
  return std::make_unique<TimedRequest>(inner_.irecv(b, n, t, peer, tag), clock_, clock_.separate_receive_waits);
}

}  // namespace sextant
