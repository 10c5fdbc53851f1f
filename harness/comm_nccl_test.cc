// The NCCL communicator under mpiexec (1 and 2 ranks), one GPU per rank. It
// skips, saying why, where no GPU is visible or ranks would share a GPU.
// Beyond the shared contract: the stream ordering that lets communication
// overlap compute (inputs written on the compute stream are sent, results
// are visible to later compute-stream work, a request's wait() orders the
// compute stream without blocking the host).
#include "harness/comm_nccl.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "harness/error.h"
#include "harness/gpu_binding.h"
#include "harness/testing/comm_contract.h"
#include "harness/testing/gpu.h"
#include "harness/testing/mpi_world.h"

namespace sextant {
namespace {

using testing::world;

// The world's NCCL communicator, or a skip when this machine cannot make one.
#define REQUIRE_GPU_PER_RANK()                                                                                 \
  SEXTANT_REQUIRE_GPU();                                                                                       \
  do {                                                                                                         \
    GpuBinding b = bind_gpus(MPI_COMM_WORLD);                                                                  \
    if (b.shared)                                                                                              \
      GTEST_SKIP() << "NCCL needs one GPU per rank: " << b.ranks_per_node << " ranks share " << b.visible_gpus \
                   << " GPU(s) here (the staged communicator covers this case)";                               \
  } while (0)

// One per test: destroyed before MPI_Finalize and the CUDA runtime's teardown.
std::unique_ptr<NcclCommunicator> comm() { return NcclCommunicator::create(world()); }

cudaStream_t compute() { return static_cast<cudaStream_t>(cuda_compute_stream()); }

TEST(NcclCommunicator, MeetsTheCommunicatorContract) {
  REQUIRE_GPU_PER_RANK();
  auto owned = comm();
  NcclCommunicator& c = *owned;
  EXPECT_EQ(c.backend(), "nccl");
  EXPECT_TRUE(c.overlaps_compute());
  EXPECT_TRUE(c.timings_representative());
  testing::check_communicator_contract(c);
}

// Pinned host memory so the asynchronous copies below stay asynchronous.
struct Pinned {
  explicit Pinned(size_t n) { EXPECT_EQ(cudaMallocHost(&data, n * sizeof(float)), cudaSuccess); }
  ~Pinned() { cudaFreeHost(data); }
  float* data = nullptr;
};

TEST(NcclCommunicator, OrdersCollectivesAgainstTheComputeStream) {
  REQUIRE_GPU_PER_RANK();
  auto owned = comm();
  NcclCommunicator& c = *owned;
  const int n = c.size(), count = 1 << 20;  // large enough that a missing wait shows
  Pinned in(count), out(count);
  for (int i = 0; i < count; ++i) in.data[i] = static_cast<float>(i % 7 + c.rank());
  Tensor buffer = Tensor::zeros({count}, DType::f32, Device::cuda);
  // Input written by the compute stream, result read back by it: no host sync in between.
  ASSERT_EQ(cudaMemcpyAsync(buffer.raw(), in.data, count * 4, cudaMemcpyHostToDevice, compute()), cudaSuccess);
  c.all_reduce(buffer);
  ASSERT_EQ(cudaMemcpyAsync(out.data, buffer.raw(), count * 4, cudaMemcpyDeviceToHost, compute()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(compute()), cudaSuccess);
  int64_t wrong = 0;
  for (int i = 0; i < count; ++i) wrong += out.data[i] != static_cast<float>(n * (i % 7) + n * (n - 1) / 2);
  EXPECT_EQ(wrong, 0);
}

TEST(NcclCommunicator, RequestWaitOrdersTheComputeStream) {
  REQUIRE_GPU_PER_RANK();
  auto owned = comm();
  NcclCommunicator& c = *owned;
  const int n = c.size(), r = c.rank(), count = 1 << 20;
  Pinned in(count), out(count);
  for (int i = 0; i < count; ++i) in.data[i] = static_cast<float>(r * 10 + i % 5);
  Tensor send = Tensor::empty({count}, DType::f32, Device::cuda);
  Tensor recv = Tensor::zeros({count}, DType::f32, Device::cuda);
  ASSERT_EQ(cudaMemcpyAsync(send.raw(), in.data, count * 4, cudaMemcpyHostToDevice, compute()), cudaSuccess);
  std::vector<RequestPtr> requests;
  c.group_start();
  requests.push_back(c.irecv(recv.raw(), count, DType::f32, (r - 1 + n) % n, 0));
  requests.push_back(c.isend(send.raw(), count, DType::f32, (r + 1) % n, 0));
  c.group_end();
  wait_all(requests);  // orders the compute stream; the host goes on
  ASSERT_EQ(cudaMemcpyAsync(out.data, recv.raw(), count * 4, cudaMemcpyDeviceToHost, compute()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(compute()), cudaSuccess);
  const int prev = (r - 1 + n) % n;
  int64_t wrong = 0;
  for (int i = 0; i < count; ++i) wrong += out.data[i] != static_cast<float>(prev * 10 + i % 5);
  EXPECT_EQ(wrong, 0);
}

TEST(NcclCommunicator, WaitInsideItsGroupIsAnError) {
  REQUIRE_GPU_PER_RANK();
  auto owned = comm();
  NcclCommunicator& c = *owned;
  const int n = c.size(), r = c.rank();
  Tensor a = Tensor::zeros({4}, DType::f32, Device::cuda), b = Tensor::zeros({4}, DType::f32, Device::cuda);
  c.group_start();
  RequestPtr rx = c.irecv(b.raw(), 4, DType::f32, (r - 1 + n) % n, 0);
  RequestPtr tx = c.isend(a.raw(), 4, DType::f32, (r + 1) % n, 0);
  EXPECT_THROW(rx->wait(), RuntimeError);
  c.group_end();
  rx->wait();
  tx->wait();
  c.barrier();
}

}  // namespace
}  // namespace sextant
