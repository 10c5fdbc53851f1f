// The MPI backend: host buffers, any MPI (OpenMPI in this project).
#pragma once

#include <mpi.h>

#include <memory>

#include "harness/comm.h"

namespace sextant {

class MpiCommunicator : public Communicator {
 public:
  // Wraps comm; frees it on destruction when owned.
  explicit MpiCommunicator(MPI_Comm comm, bool owned = false);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  static std::unique_ptr<MpiCommunicator> world();  // a duplicate of MPI_COMM_WORLD

  // The Tensor conveniences of the base class stay visible next to the overrides.
  using Communicator::all_gather;
  using Communicator::all_reduce;
  using Communicator::all_to_all;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  Device device() const override { return Device::host; }
  MPI_Comm handle() const { return comm_; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  void all_to_all(const void* send, void* recv, size_t count_per_peer, DType dtype) override;
  void all_to_all_v(const void* send, const std::vector<size_t>& send_counts, const std::vector<size_t>& send_displs,
                    void* recv, const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                    DType dtype) override;
  void broadcast(void* buffer, size_t count, DType dtype, int root) override;
  void barrier() override;
  RequestPtr iall_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  RequestPtr ireduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) override;
  RequestPtr iall_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  RequestPtr isend(const void* buffer, size_t count, DType dtype, int peer, int tag) override;
  RequestPtr irecv(void* buffer, size_t count, DType dtype, int peer, int tag) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  // One node's POSIX shared memory (peer_memory_mpi.cc).
  std::shared_ptr<PeerMemory> peer_memory(size_t bytes) override;

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
};

// Throws RuntimeError naming the call when an MPI function fails.
void check_mpi(int status, const char* call);

}  // namespace sextant
