#include "kernels/model/timed_comm.h"

#include "harness/timing.h"

namespace sextant::model {

namespace {

// Adds the seconds of its scope to a clock.
class Span {
 public:
  explicit Span(double& into, int64_t* calls = nullptr) : into_(into), start_(now_seconds()) {
    if (calls) ++*calls;
  }
  ~Span() { into_ += now_seconds() - start_; }

 private:
  double& into_;
  double start_;
};

class TimedRequest : public Request {
 public:
  TimedRequest(RequestPtr inner, double& into) : inner_(std::move(inner)), into_(into) {}
  void wait() override {
    Span span(into_);
    inner_->wait();
  }

 private:
  RequestPtr inner_;
  double& into_;
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
  Span span(clock_.seconds, &clock_.calls);
  inner_.all_reduce(s, r, n, t, op);
}
void TimedCommunicator::reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) {
  Span span(clock_.seconds, &clock_.calls);
  inner_.reduce_scatter(s, r, n, t, op);
}
void TimedCommunicator::all_gather(const void* s, void* r, size_t n, DType t) {
  Span span(clock_.seconds, &clock_.calls);
  inner_.all_gather(s, r, n, t);
}
void TimedCommunicator::all_to_all(const void* s, void* r, size_t n, DType t) {
  Span span(clock_.seconds, &clock_.calls);
  inner_.all_to_all(s, r, n, t);
}
void TimedCommunicator::all_to_all_v(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd,
                                     void* r, const std::vector<size_t>& rc, const std::vector<size_t>& rd, DType t) {
  Span span(clock_.seconds, &clock_.calls);
  inner_.all_to_all_v(s, sc, sd, r, rc, rd, t);
}
void TimedCommunicator::broadcast(void* b, size_t n, DType t, int root) {
  Span span(clock_.seconds, &clock_.calls);
  inner_.broadcast(b, n, t, root);
}
void TimedCommunicator::barrier() {
  Span span(clock_.seconds, &clock_.calls);
  inner_.barrier();
}
RequestPtr TimedCommunicator::isend(const void* b, size_t n, DType t, int peer, int tag) {
  Span span(clock_.seconds, &clock_.calls);
  return std::make_unique<TimedRequest>(inner_.isend(b, n, t, peer, tag), clock_.seconds);
}
RequestPtr TimedCommunicator::irecv(void* b, size_t n, DType t, int peer, int tag) {
  Span span(clock_.seconds, &clock_.calls);
  double& waits = clock_.separate_receive_waits ? clock_.input_wait : clock_.seconds;
  return std::make_unique<TimedRequest>(inner_.irecv(b, n, t, peer, tag), waits);
}

}  // namespace sextant::model
