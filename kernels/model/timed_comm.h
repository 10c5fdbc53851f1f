// A communicator that measures the time spent communicating, so the step can
// split its time into compute and exposed communication per dimension:
//   seconds  wall time while at least one operation of the clock is in
//            flight: a blocking call while inside it, a nonblocking
//            collective from its start until a test() or wait() sees it
//            complete (an upper bound: completion is seen only when asked),
//            point-to-point while posting and waiting;
//   exposed  the time the caller spent inside those calls, tests and waits.
// On the host a blocking collective is communication and exposed alike; a
// nonblocking one in flight behind compute is communication, not exposed.
// Waits on receives can be counted apart (`input_wait`): in a pipeline,
// waiting for the previous stage's activation is the bubble, not transfer
// time. On NCCL a call only enqueues work on a stream: its seconds are the
// enqueue's, not the transfer's.
#pragma once

#include <memory>

#include "harness/comm_faulty.h"

namespace sextant::model {

struct CommClock {
  double seconds = 0;     // communication (see above)
  double exposed = 0;     // of which the caller waited
  double input_wait = 0;  // waits on receives, when the clock keeps them apart
  int64_t calls = 0;
  bool separate_receive_waits = false;
  // Operations in flight, and since when (the interval being counted).
  int in_flight = 0;
  double since = 0;
  void begin(double now) {
    if (in_flight++ == 0) since = now;
  }
  void end(double now) {
    if (--in_flight == 0) seconds += now - since;
  }
  // Zero counts; what is in flight counts from now on.
  void reset(double now) {
    seconds = exposed = input_wait = 0, calls = 0;
    since = now;
  }
};

class TimedCommunicator : public ForwardingCommunicator {
 public:
  TimedCommunicator(Communicator& inner, CommClock& clock) : ForwardingCommunicator(inner), clock_(clock) {}
  // A sub-group of this one, timed on the same clock (owns the inner split).
  std::unique_ptr<Communicator> split(int color, int key) override;

  void all_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) override;
  void reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) override;
  void all_gather(const void* s, void* r, size_t n, DType t) override;
  void all_to_all(const void* s, void* r, size_t n, DType t) override;
  void all_to_all_v(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd, void* r,
                    const std::vector<size_t>& rc, const std::vector<size_t>& rd, DType t) override;
  void broadcast(void* b, size_t n, DType t, int root) override;
  void barrier() override;
  RequestPtr iall_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) override;
  RequestPtr ireduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) override;
  RequestPtr iall_gather(const void* s, void* r, size_t n, DType t) override;
  RequestPtr isend(const void* b, size_t n, DType t, int peer, int tag) override;
  RequestPtr irecv(void* b, size_t n, DType t, int peer, int tag) override;

  // Tensor conveniences of the base class.
  using Communicator::all_gather;
  using Communicator::all_reduce;
  using Communicator::all_to_all;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;

 private:
  CommClock& clock_;
};

}  // namespace sextant::model
