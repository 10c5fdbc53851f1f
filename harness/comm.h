// Communicator: one interface with NCCL-like semantics over two backends,
// mpi (host buffers) and nccl (device buffers). Collectives are never written
// by hand here: the backends call MPI or NCCL.
//
// Counts are in elements. In-place follows NCCL's rules:
//   all_reduce:     send == recv
//   all_gather:     send == recv + rank * send_count
//   reduce_scatter: recv == send + rank * recv_count
// all_to_all:   block p of send goes to peer p; block p of recv came from peer p.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/dtype.h"
#include "harness/tensor.h"

namespace sextant {

enum class ReduceOp { sum, max, min };

// Memory every rank of a communicator maps: a part of bytes() per rank, rank
// r's part at at(r) in every process (one node's shared memory). A rank
// writes rows straight into a peer's part, with no message and no staging
// copy, as DeepEP's intranode kernels write into NVLink peers' buffers.
// sync() is collective: every rank's writes before it are visible to every
// rank after it. Unmapping is local (no collective at destruction).
class PeerMemory {
 public:
  virtual ~PeerMemory() = default;
  virtual size_t bytes() const = 0;  // of each rank's part
  virtual char* at(int rank) = 0;
  virtual void sync() = 0;
};

// A pending nonblocking operation.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  // True once the operation is complete (then wait() returns at once). On
  // MPI each call also lets pending operations advance: a host rank's
  // nonblocking collective progresses only while MPI is called. Default:
  // completion unknown until wait().
  virtual bool test() { return false; }
};
using RequestPtr = std::unique_ptr<Request>;
void wait_all(std::vector<RequestPtr>& requests);

// Bytes this rank sends under the bandwidth-optimal (ring) algorithm for each
// call, the convention behind nccl-tests' busbw: all_reduce 2(n-1)/n * N,
// all_gather / reduce_scatter / all_to_all (n-1)/n * N (N = whole buffer),
// all_to_all_v the bytes addressed to other ranks, send the message.
// The operations a communicator counts (CommStats keys are their names).
enum class CommOp { all_reduce, reduce_scatter, all_gather, all_to_all, all_to_all_v, broadcast, send };
const char* comm_op_name(CommOp op);

struct CommStats {
  std::map<std::string, uint64_t> bytes_sent;  // by operation name
  std::map<std::string, uint64_t> calls;
  uint64_t total_bytes() const;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "nccl", ...
  virtual Device device() const = 0;        // where its buffers live
  // Whether communication runs on its own stream, overlapping compute (nccl).
  virtual bool overlaps_compute() const { return false; }
  // False where timings do not represent the hardware (mpi-staged: device
  // buffers copied through host memory, several ranks on one GPU).
  virtual bool timings_representative() const { return true; }

  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) = 0;
  virtual void all_gather(const void* send, void* recv, size_t send_count, DType dtype) = 0;
  virtual void all_to_all(const void* send, void* recv, size_t count_per_peer, DType dtype) = 0;
  // Counts and displacements (elements) per peer.
  virtual void all_to_all_v(const void* send, const std::vector<size_t>& send_counts,
                            const std::vector<size_t>& send_displs, void* recv, const std::vector<size_t>& recv_counts,
                            const std::vector<size_t>& recv_displs, DType dtype) = 0;
  virtual void broadcast(void* buffer, size_t count, DType dtype, int root) = 0;
  virtual void barrier() = 0;
  // Nonblocking collectives: the same results and in-place rules as the
  // blocking ones, complete at wait() (or when test() says so). Buffers
  // stay untouched by the caller until then; every rank issues the group's
  // collectives in the same order.
  virtual RequestPtr iall_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual RequestPtr ireduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) = 0;
  virtual RequestPtr iall_gather(const void* send, void* recv, size_t send_count, DType dtype) = 0;
  virtual RequestPtr isend(const void* buffer, size_t count, DType dtype, int peer, int tag) = 0;
  virtual RequestPtr irecv(void* buffer, size_t count, DType dtype, int peer, int tag) = 0;
  // Brackets several isend/irecv that must be issued together (NCCL group
  // semantics); a no-op for MPI.
  virtual void group_start() {}
  virtual void group_end() {}
  // New communicator of the ranks that pass the same color, ordered by key;
  // color < 0 joins none and returns nullptr. Collective over this communicator.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Collective: `bytes` of peer memory per rank (see PeerMemory), or null
  // where the ranks do not all share memory (several nodes, device buffers)
  // or the system refuses it; callers then use the collectives.
  virtual std::shared_ptr<PeerMemory> peer_memory(size_t /*bytes*/) { return nullptr; }

  // Traffic counters (see CommStats). Wrappers forward to the wrapped one.
  virtual CommStats& stats() { return stats_; }
  void reset_stats() { stats() = CommStats{}; }

  // Tensor conveniences (whole tensors, same dtype).
  void all_reduce(Tensor& t, ReduceOp op = ReduceOp::sum);
  void all_gather(const Tensor& send, Tensor& recv);
  void reduce_scatter(const Tensor& send, Tensor& recv, ReduceOp op = ReduceOp::sum);
  void all_to_all(const Tensor& send, Tensor& recv);
  void broadcast(Tensor& t, int root);
  // Scalars.
  double all_reduce_value(double value, ReduceOp op);
  int64_t all_reduce_count(int64_t value);  // sum, exact

 protected:
  // Records bytes for one call of `op` (bytes already follow the CommStats convention).
  void count(CommOp op, uint64_t bytes);

 private:
  CommStats stats_;
};

// Every rank's string, on every rank, in rank order (host communicators).
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine);

// Bytes one rank sends for a collective of `bytes` (whole buffer) over n ranks
// under the ring algorithm; see CommStats.
uint64_t ring_bytes_sent(CommOp op, uint64_t bytes, int n);

}  // namespace sextant
