// Communicator wrappers. ForwardingCommunicator passes everything through;
// FaultyCommunicator plants a named fault in one operation so that a suite
// can prove its check catches it (docs/CONFORMANCE.md, "Proving the checks").
#pragma once

#include <string>
#include <vector>

#include "harness/comm.h"

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
  CommStats& stats() override { return inner_.stats(); }

 protected:
  Communicator& inner_;
};

// Faults (names as accepted by --fault):
//   allgather_order  all_gather returns the blocks of ranks 0 and 1 swapped
//   drop_rank        all_reduce / reduce_scatter ignore the last rank's data
//   a2a_order        all_to_all(_v) deliver each block to the next peer's slot
//   broadcast_root   broadcast sends from rank 1 instead of the given root
class FaultyCommunicator : public ForwardingCommunicator {
 public:
  FaultyCommunicator(Communicator& inner, std::string fault);
  static const std::vector<std::string>& faults();

  void all_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) override;
  void reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) override;
  void all_gather(const void* s, void* r, size_t n, DType t) override;
  void all_to_all(const void* s, void* r, size_t n, DType t) override;
  void all_to_all_v(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd, void* r,
                    const std::vector<size_t>& rc, const std::vector<size_t>& rd, DType t) override;
  void broadcast(void* b, size_t n, DType t, int root) override;

 private:
  std::string fault_;
};

}  // namespace sextant
