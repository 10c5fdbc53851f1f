// Communicator decorators, all derived from ForwardingCommunicator, which
// passes everything through:
//   FaultyCommunicator    plants a fault of the comm family in one operation,
//                         so a suite can prove its check catches it
//                         (docs/CONFORMANCE.md, "Proving the checks");
//   TimedCommunicator     measures the time spent communicating and the
//                         part the caller waited for (the step's time split);
//   LoopbackCommunicator  moves nothing, so a case can time its compute alone.
// Implementations: comm_faulty.cc, comm_timed.cc, comm_loopback.cc.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/comm.h"
#include "harness/fault_table.h"

namespace sextant {

class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(Communicator& inner) : inner_(inner) {}
  // The Tensor conveniences of the base class stay visible next to the overrides.
  using Communicator::all_gather;
  using Communicator::all_reduce;
  using Communicator::all_to_all;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend(); }
  Device device() const override { return inner_.device(); }
  bool overlaps_compute() const override { return inner_.overlaps_compute(); }
  bool timings_representative() const override { return inner_.timings_representative(); }
  void all_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) override {
    inner_.all_reduce(s, r, n, t, op);
  }
  void reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) override {
    inner_.reduce_scatter(s, r, n, t, op);
  }
  void all_gather(const void* s, void* r, size_t n, DType t) override { inner_.all_gather(s, r, n, t); }
  void all_to_all(const void* s, void* r, size_t n, DType t) override { inner_.all_to_all(s, r, n, t); }
  void all_to_all_v(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd, void* r,
                    const std::vector<size_t>& rc, const std::vector<size_t>& rd, DType t) override {
    inner_.all_to_all_v(s, sc, sd, r, rc, rd, t);
  }
  void broadcast(void* b, size_t n, DType t, int root) override { inner_.broadcast(b, n, t, root); }
  void barrier() override { inner_.barrier(); }
  RequestPtr iall_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) override {
    return inner_.iall_reduce(s, r, n, t, op);
  }
  RequestPtr ireduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) override {
    return inner_.ireduce_scatter(s, r, n, t, op);
  }
  RequestPtr iall_gather(const void* s, void* r, size_t n, DType t) override { return inner_.iall_gather(s, r, n, t); }
  RequestPtr isend(const void* b, size_t n, DType t, int peer, int tag) override {
    return inner_.isend(b, n, t, peer, tag);
  }
  RequestPtr irecv(void* b, size_t n, DType t, int peer, int tag) override { return inner_.irecv(b, n, t, peer, tag); }
  void group_start() override { inner_.group_start(); }
  void group_end() override { inner_.group_end(); }
  std::unique_ptr<Communicator> split(int color, int key) override { return inner_.split(color, key); }
  std::shared_ptr<PeerMemory> peer_memory(size_t bytes) override { return inner_.peer_memory(bytes); }
  CommStats& stats() override { return inner_.stats(); }

 protected:
  Communicator& inner_;
};

// The comm family of planted faults: each breaks one operation.
enum class CommFault {
  none,
  allgather_order,  // all_gather returns the blocks of ranks 0 and 1 swapped
  drop_rank,        // all_reduce / reduce_scatter ignore the last rank's data
  a2a_order,        // all_to_all(_v) deliver each block to the next peer's slot
  broadcast_root,   // broadcast sends from rank 1 instead of the given root
};
// What a case runs, as the faults see it: its operations and group size.
struct CommFaultSite {
  std::vector<CommOp> ops;
  int group_size = 2;
};
namespace comm_rules {

inline bool runs(const CommFaultSite& s, CommOp a, CommOp b) {
  return s.group_size >= 2 && std::any_of(s.ops.begin(), s.ops.end(), [&](CommOp op) { return op == a || op == b; });
}

}  // namespace comm_rules

inline const FaultTable<CommFault, CommFaultSite>& comm_faults() {
  static const FaultTable<CommFault, CommFaultSite> table(
      "collective",
      {
          {CommFault::allgather_order, "allgather_order", "all_gather returns the blocks of ranks 0 and 1 swapped",
           "an all_gather over 2+ ranks",
           [](const CommFaultSite& s) { return comm_rules::runs(s, CommOp::all_gather, CommOp::all_gather); }},
          {CommFault::drop_rank, "drop_rank", "all_reduce and reduce_scatter ignore the last rank's data",
           "an all_reduce or reduce_scatter over 2+ ranks",
           [](const CommFaultSite& s) { return comm_rules::runs(s, CommOp::all_reduce, CommOp::reduce_scatter); }},
          {CommFault::a2a_order, "a2a_order",
           "all_to_all(_v) deliver each block to the next peer's slot (peer memory: writes land in the next peer's "
           "part)",
           "an all_to_all(_v) over 2+ ranks",
           [](const CommFaultSite& s) { return comm_rules::runs(s, CommOp::all_to_all, CommOp::all_to_all_v); }},
          {CommFault::broadcast_root, "broadcast_root", "broadcast sends from rank 1 instead of the given root",
           "a broadcast over 2+ ranks",
           [](const CommFaultSite& s) { return comm_rules::runs(s, CommOp::broadcast, CommOp::broadcast); }},
      });
  return table;
}

class FaultyCommunicator : public ForwardingCommunicator {
 public:
  FaultyCommunicator(Communicator& inner, CommFault fault);

  void all_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) override;
  void reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) override;
  void all_gather(const void* s, void* r, size_t n, DType t) override;
  void all_to_all(const void* s, void* r, size_t n, DType t) override;
  void all_to_all_v(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd, void* r,
                    const std::vector<size_t>& rc, const std::vector<size_t>& rd, DType t) override;
  void broadcast(void* b, size_t n, DType t, int root) override;
  std::shared_ptr<PeerMemory> peer_memory(size_t bytes) override;

 private:
  CommFault fault_;
};

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

// A communicator that moves nothing, for the suite's compute_only region
// (overlap efficiency = compute-only time / fwd_bwd time). It keeps the
// group's size and rank so the kernels run exactly their compute, and
// answers every call from this rank's own data: all_gather replicates the
// local block, all_to_all keeps each block in place, reduce_scatter takes
// the local slice, and irecv copies the message this rank isent with the
// same tag. The values are wrong; the work is the same. Buffers live where
// the wrapped group's do (host, or device for a GPU communicator).
class LoopbackCommunicator : public ForwardingCommunicator {
 public:
  explicit LoopbackCommunicator(Communicator& group) : ForwardingCommunicator(group) {}
  using Communicator::all_gather;
  using Communicator::all_reduce;
  using Communicator::all_to_all;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;

  void all_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) override;
  void reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) override;
  void all_gather(const void* s, void* r, size_t n, DType t) override;
  void all_to_all(const void* s, void* r, size_t n, DType t) override;
  void all_to_all_v(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd, void* r,
                    const std::vector<size_t>& rc, const std::vector<size_t>& rd, DType t) override;
  void broadcast(void*, size_t, DType, int) override {}
  void barrier() override {}
  RequestPtr isend(const void* b, size_t n, DType t, int peer, int tag) override;
  RequestPtr irecv(void* b, size_t n, DType t, int peer, int tag) override;
  std::unique_ptr<Communicator> split(int, int) override;
  // None: the dispatchers fall back to all_to_all_v, which moves nothing here.
  std::shared_ptr<PeerMemory> peer_memory(size_t) override { return nullptr; }

 private:
  struct Sent {
    const void* buffer = nullptr;
    size_t bytes = 0;
  };
  void copy(void* dst, const void* src, size_t bytes) const;

  std::map<int, Sent> sent_;  // by tag: the latest isend, for the matching irecv
};

}  // namespace sextant
