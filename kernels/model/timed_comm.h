// A communicator that measures the time spent inside its calls, so the step
// can split its time into compute and exposed communication per dimension.
// On the host every collective blocks, so time inside a call is exposed time;
// for nonblocking point-to-point the time counted is that of posting and of
// wait() (what the caller could not overlap). Waits on receives can be
// counted apart (`input_wait`): in a pipeline, waiting for the previous
// stage's activation is the bubble, not transfer time. On NCCL a call only
// enqueues work on a stream: its seconds are the enqueue's, not the transfer's.
#pragma once

#include <memory>

#include "harness/comm_faulty.h"

namespace sextant::model {

struct CommClock {
  double seconds = 0;     // inside calls (and waits that count as communication)
  double input_wait = 0;  // waits on receives, when the clock keeps them apart
  int64_t calls = 0;
  bool separate_receive_waits = false;
  void reset() { seconds = input_wait = 0, calls = 0; }
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
