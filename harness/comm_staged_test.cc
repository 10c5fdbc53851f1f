// The staged communicator at 1, 2 and 4 ranks. Its staging logic runs on any
// machine: host memory stands in for device memory, with every copy counted;
// where a GPU exists the same contract runs on device buffers, the ranks
// sharing the GPU as the device check does.
#include "harness/comm_staged.h"

#include <gtest/gtest.h>

#include <cstring>

#include "harness/gpu_binding.h"
#include "harness/testing/comm_contract.h"
#include "harness/testing/gpu.h"
#include "harness/testing/mpi_world.h"

namespace sextant {
namespace {

using testing::world;

// Host memory as the "device", counting the bytes staged each way.
class CountingHostStaging : public StagingMemory {
 public:
  Device device() const override { return Device::host; }
  void to_host(void* host, const void* buffer, size_t bytes) override {
    std::memcpy(host, buffer, bytes);
    to_host_bytes += bytes;
  }
  void to_buffer(void* buffer, const void* host, size_t bytes) override {
    std::memcpy(buffer, host, bytes);
    to_buffer_bytes += bytes;
  }
  size_t to_host_bytes = 0, to_buffer_bytes = 0;
};

TEST(StagedCommunicator, MeetsTheContractThroughHostStaging) {
  auto memory = std::make_shared<CountingHostStaging>();
  auto comm = StagedCommunicator::create(world(), memory);
  testing::check_communicator_contract(*comm);
  EXPECT_GT(memory->to_host_bytes, 0u);
  EXPECT_GT(memory->to_buffer_bytes, 0u);
}

TEST(StagedCommunicator, StagesInputsInAndResultsOutOnce) {
  auto memory = std::make_shared<CountingHostStaging>();
  auto comm = StagedCommunicator::create(world(), memory);
  const int n = comm->size();
  std::vector<float> send(8 * n, 1.0f), recv(8 * n, 0.0f);
  comm->all_reduce(send.data(), recv.data(), 8, DType::f32, ReduceOp::sum);
  EXPECT_EQ(memory->to_host_bytes, 32u);
  EXPECT_EQ(memory->to_buffer_bytes, 32u);
  comm->all_gather(send.data(), recv.data(), 8, DType::f32);
  EXPECT_EQ(memory->to_host_bytes, 64u);
  EXPECT_EQ(memory->to_buffer_bytes, 32u + 32u * n);
  // A receive reaches the buffer at wait(), not before.
  float in = -1.0f, out = 2.0f;
  const size_t before = memory->to_buffer_bytes;
  RequestPtr rx = comm->irecv(&in, 1, DType::f32, 0, 5);
  std::vector<RequestPtr> sends;
  if (comm->rank() == 0)
    for (int p = 0; p < n; ++p) sends.push_back(comm->isend(&out, 1, DType::f32, p, 5));
  EXPECT_EQ(memory->to_buffer_bytes, before);
  EXPECT_EQ(in, -1.0f);
  rx->wait();
  wait_all(sends);
  EXPECT_EQ(memory->to_buffer_bytes, before + 4);
  EXPECT_EQ(in, 2.0f);
}

TEST(StagedCommunicator, SaysWhatItIsAndCountsLikeMpi) {
  auto comm = StagedCommunicator::create(world(), std::make_shared<CountingHostStaging>());
  EXPECT_EQ(comm->backend(), "mpi-staged");
  EXPECT_FALSE(comm->timings_representative());
  EXPECT_FALSE(comm->overlaps_compute());
  std::vector<double> x(10, 1.0);
  comm->all_reduce(x.data(), x.data(), 10, DType::f64, ReduceOp::sum);
  EXPECT_EQ(comm->stats().bytes_sent["all_reduce"], ring_bytes_sent(CommOp::all_reduce, 80, comm->size()));
  EXPECT_EQ(x[0], comm->size());
}

// The device check's staged runs: ranks share the GPU(s), buffers in device memory.
TEST(StagedCommunicator, MeetsTheContractOnGpuBuffers) {
  SEXTANT_REQUIRE_GPU();
  bind_gpus(MPI_COMM_WORLD);
  auto comm = StagedCommunicator::create(world());
  EXPECT_EQ(comm->device(), Device::cuda);
  testing::check_communicator_contract(*comm);
}

}  // namespace
}  // namespace sextant
