// The NCCL backend: device buffers, one process per GPU (CUDA builds only).
//
// Streams: NCCL runs on the communicator's own stream. Each call first makes
// that stream wait for the work issued so far on the compute stream (where
// the ops run, cuda_compute_stream()), and afterwards makes the compute stream
// wait for the call's completion, all with events: nothing blocks the host,
// later kernels see finished results, and kernels issued between a
// nonblocking isend/irecv and its wait() overlap the transfer.
//
// Semantics differ from MPI in two documented ways: collectives return before
// the transfer is done (stream order replaces host blocking), and tags are
// ignored (messages between a pair of ranks match in issue order, as in NCCL).
// Point-to-point calls that depend on each other must be bracketed by
// group_start() / group_end(), or they deadlock on the GPU.
#pragma once

#include <memory>

#include "harness/comm.h"
#include "harness/comm_mpi.h"

namespace sextant {

class NcclCommunicator : public Communicator {
 public:
  // Collective over `group`: the NCCL communicator of the same ranks, on the
  // current CUDA device (cuda_set_device); rank 0 makes the unique id and
  // broadcasts it over MPI.
  static std::unique_ptr<NcclCommunicator> create(MpiCommunicator& group);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  using Communicator::all_gather;
  using Communicator::all_reduce;
  using Communicator::all_to_all;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;

  int rank() const override;
  int size() const override;
  std::string backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda; }
  bool overlaps_compute() const override { return true; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  void all_to_all(const void* send, void* recv, size_t count_per_peer, DType dtype) override;
  void all_to_all_v(const void* send, const std::vector<size_t>& send_counts, const std::vector<size_t>& send_displs,
                    void* recv, const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                    DType dtype) override;
  void broadcast(void* buffer, size_t count, DType dtype, int root) override;
  // Waits for this rank's outstanding GPU work, then an MPI barrier.
  void barrier() override;
  // On the communication stream; the compute stream waits for them at wait().
  RequestPtr iall_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  RequestPtr ireduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) override;
  RequestPtr iall_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  RequestPtr isend(const void* buffer, size_t count, DType dtype, int peer, int tag) override;
  RequestPtr irecv(void* buffer, size_t count, DType dtype, int peer, int tag) override;
  void group_start() override;
  void group_end() override;
  // ncclCommSplit (and the matching MPI split for barriers).
  std::unique_ptr<Communicator> split(int color, int key) override;

  struct Impl;

 private:
  explicit NcclCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sextant
