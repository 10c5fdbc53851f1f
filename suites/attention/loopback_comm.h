// A communicator that moves nothing, for the suite's compute_only region
// (overlap efficiency = compute-only time / fwd_bwd time). It keeps the
// group's size and rank so the kernels run exactly their compute, and
// answers every call from this rank's own data: all_gather replicates the
// local block, all_to_all keeps each block in place, reduce_scatter takes
// the local slice, and irecv copies the message this rank isent with the
// same tag. The values are wrong; the work is the same. Buffers live where
// the wrapped group's do (host, or device for a GPU communicator).
#pragma once

#include <map>

#include "harness/comm_faulty.h"

namespace sextant::attention {

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

 private:
  struct Sent {
    const void* buffer = nullptr;
    size_t bytes = 0;
  };
  void copy(void* dst, const void* src, size_t bytes) const;

  std::map<int, Sent> sent_;  // by tag: the latest isend, for the matching irecv
};

}  // namespace sextant::attention
