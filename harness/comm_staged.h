// The staged backend ("mpi-staged"): device buffers, moved by MPI through
// host memory. Every call copies its device input to a host buffer, runs the
// MPI operation there and copies the result back, so several MPI ranks can
// share one GPU and multi-rank GPU kernels can be checked on a single-GPU
// machine. Correct but slow: its timings are labeled not representative.
//
// Calls block like MPI's (the copies order with the compute stream through
// the legacy default stream); isend/irecv and the nonblocking collectives
// are nonblocking on the host (inputs staged when they start), and a result
// reaches the device when the operation is seen complete (wait or test).
#pragma once

#include <memory>
#include <vector>

#include "harness/comm.h"
#include "harness/comm_mpi.h"

namespace sextant {

// Where the communicator's buffers live and how bytes move between them and
// host staging memory. cuda_staging() is the real one; tests of the staging
// logic on machines without a GPU pass host memory with counted copies.
class StagingMemory {
 public:
  virtual ~StagingMemory() = default;
  virtual Device device() const = 0;
  virtual void to_host(void* host, const void* buffer, size_t bytes) = 0;
  virtual void to_buffer(void* buffer, const void* host, size_t bytes) = 0;
};
// Device buffers of the current GPU (cudaMemcpy; throws in builds without CUDA).
std::shared_ptr<StagingMemory> cuda_staging();
// Host buffers (memcpy): the staged path on machines without a GPU, so every
// suite can run through it on CPUs (`sextant run --comm staged`).
std::shared_ptr<StagingMemory> host_staging();

class StagedCommunicator : public Communicator {
 public:
  // Collective over `group`: the same ranks (a duplicate), staging through `memory`.
  static std::unique_ptr<StagedCommunicator> create(MpiCommunicator& group,
                                                    std::shared_ptr<StagingMemory> memory = cuda_staging());
  StagedCommunicator(std::unique_ptr<MpiCommunicator> host, std::shared_ptr<StagingMemory> memory);

  using Communicator::all_gather;
  using Communicator::all_reduce;
  using Communicator::all_to_all;
  using Communicator::broadcast;
  using Communicator::reduce_scatter;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string backend() const override { return "mpi-staged"; }
  Device device() const override { return memory_->device(); }
  bool timings_representative() const override { return false; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  void all_to_all(const void* send, void* recv, size_t count_per_peer, DType dtype) override;
  void all_to_all_v(const void* send, const std::vector<size_t>& send_counts, const std::vector<size_t>& send_displs,
                    void* recv, const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                    DType dtype) override;
  void broadcast(void* buffer, size_t count, DType dtype, int root) override;
  void barrier() override { host_->barrier(); }
  RequestPtr iall_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  RequestPtr ireduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) override;
  RequestPtr iall_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  RequestPtr isend(const void* buffer, size_t count, DType dtype, int peer, int tag) override;
  RequestPtr irecv(void* buffer, size_t count, DType dtype, int peer, int tag) override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  // Traffic is what the MPI communicator underneath counts (same convention).
  CommStats& stats() override { return host_->stats(); }

 private:
  // Host copies of a device range; reused between calls.
  char* stage_in(const void* buffer, size_t bytes);
  char* scratch_out(size_t bytes);

  std::unique_ptr<MpiCommunicator> host_;
  std::shared_ptr<StagingMemory> memory_;
  std::vector<char> in_, out_;
};

}  // namespace sextant
