#include "harness/comm_wrappers.h"

#include <algorithm>
#include <cstring>

#include "harness/error.h"
#include "harness/tensor.h"

namespace sextant {

FaultyCommunicator::FaultyCommunicator(Communicator& inner, CommFault fault)
    : ForwardingCommunicator(inner), fault_(fault) {
  if (inner.device() != Device::host) throw RuntimeError("FaultyCommunicator plants faults in host buffers only");
}

namespace {
// The last rank contributes zeros instead of its data.
std::vector<char> zeros_if_last(const Communicator& c, const void* send, size_t bytes) {
  std::vector<char> buf(bytes, 0);
  if (c.rank() != c.size() - 1) std::memcpy(buf.data(), send, bytes);
  return buf;
}
}  // namespace

void FaultyCommunicator::all_reduce(const void* s, void* r, size_t n, DType t, ReduceOp op) {
  if (fault_ != CommFault::drop_rank) return inner_.all_reduce(s, r, n, t, op);
  std::vector<char> in = zeros_if_last(*this, s, n * dtype_size(t));
  inner_.all_reduce(in.data(), r, n, t, op);
}

void FaultyCommunicator::reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) {
  if (fault_ != CommFault::drop_rank) return inner_.reduce_scatter(s, r, n, t, op);
  std::vector<char> in = zeros_if_last(*this, s, n * size() * dtype_size(t));
  inner_.reduce_scatter(in.data(), r, n, t, op);
}

void FaultyCommunicator::all_gather(const void* s, void* r, size_t n, DType t) {
  inner_.all_gather(s, r, n, t);
  if (fault_ != CommFault::allgather_order || size() < 2) return;
  const size_t bytes = n * dtype_size(t);
  std::vector<char> tmp(bytes);
  char* base = static_cast<char*>(r);
  std::memcpy(tmp.data(), base, bytes);
  std::memmove(base, base + bytes, bytes);
  std::memcpy(base + bytes, tmp.data(), bytes);
}

void FaultyCommunicator::all_to_all(const void* s, void* r, size_t n, DType t) {
  inner_.all_to_all(s, r, n, t);
  if (fault_ != CommFault::a2a_order || size() < 2) return;
  const size_t bytes = n * dtype_size(t);
  char* base = static_cast<char*>(r);
  std::rotate(base, base + bytes, base + bytes * size());
}

void FaultyCommunicator::all_to_all_v(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd,
                                      void* r, const std::vector<size_t>& rc, const std::vector<size_t>& rd, DType t) {
  if (fault_ != CommFault::a2a_order || size() < 2) return inner_.all_to_all_v(s, sc, sd, r, rc, rd, t);
  // Every rank addresses block p to peer p+1: counts no longer match what the
  // peers expect, so exchange counts honestly first, then misdeliver.
  const int n = size();
  std::vector<size_t> send_counts(n), send_displs(n);
  for (int p = 0; p < n; ++p) {
    send_counts[(p + 1) % n] = sc[p];
    send_displs[(p + 1) % n] = sd[p];
  }
  std::vector<double> counts(n), recv(n);
  for (int p = 0; p < n; ++p) counts[p] = static_cast<double>(send_counts[p]);
  inner_.all_to_all(counts.data(), recv.data(), 1, DType::f64);
  size_t total = 0;
  std::vector<size_t> recv_counts(n), recv_displs(n);
  for (int p = 0; p < n; ++p) {
    recv_counts[p] = static_cast<size_t>(recv[p]);
    recv_displs[p] = total;
    total += recv_counts[p];
  }
  std::vector<char> staging(total * dtype_size(t));
  inner_.all_to_all_v(s, send_counts, send_displs, staging.data(), recv_counts, recv_displs, t);
  // Copy what fits into the caller's layout.
  size_t expected = 0;
  for (int p = 0; p < n; ++p) expected = std::max(expected, rd[p] + rc[p]);
  std::memcpy(r, staging.data(), std::min(total, expected) * dtype_size(t));
}

namespace {
// a2a_order on peer memory: another rank's part is the next rank's (this
// rank's own part stays put, or the shift would cancel out).
class ShiftedPeerMemory : public PeerMemory {
 public:
  ShiftedPeerMemory(std::shared_ptr<PeerMemory> inner, int rank, int ranks)
      : inner_(std::move(inner)), rank_(rank), ranks_(ranks) {}
  size_t bytes() const override { return inner_->bytes(); }
  char* at(int rank) override { return inner_->at(rank == rank_ ? rank : (rank + 1) % ranks_); }
  void sync() override { inner_->sync(); }

 private:
  std::shared_ptr<PeerMemory> inner_;
  int rank_, ranks_;
};
}  // namespace

std::shared_ptr<PeerMemory> FaultyCommunicator::peer_memory(size_t bytes) {
  std::shared_ptr<PeerMemory> memory = inner_.peer_memory(bytes);
  if (!memory || fault_ != CommFault::a2a_order || size() < 2) return memory;
  return std::make_shared<ShiftedPeerMemory>(std::move(memory), rank(), size());
}

void FaultyCommunicator::broadcast(void* b, size_t n, DType t, int root) {
  inner_.broadcast(b, n, t, fault_ == CommFault::broadcast_root && size() > 1 ? (root + 1) % size() : root);
}

}  // namespace sextant
