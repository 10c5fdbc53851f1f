// The communicator decorators: the timed one counts its calls (and its
// splits' calls) on one clock, the loopback one moves nothing but keeps the
// group's shape, the faulty one breaks exactly its operation.
#include "harness/comm_wrappers.h"

#include <gtest/gtest.h>

#include <cstring>

#include "harness/testing/mpi_world.h"

namespace sextant {
namespace {

using testing::world;

TEST(TimedCommunicator, CountsCallsAndTimeOnItsClock) {
  CommClock clock;
  TimedCommunicator timed(world(), clock);
  Tensor t = Tensor::zeros({4}, DType::f32);
  timed.all_reduce(t);
  timed.barrier();
  EXPECT_EQ(clock.calls, 2);
  EXPECT_GE(clock.seconds, 0.0);
  std::unique_ptr<Communicator> half = timed.split(world().rank() % 2, world().rank());
  half->barrier();  // a split is timed on the same clock
  EXPECT_EQ(clock.calls, 3);
}

TEST(LoopbackCommunicator, AllGatherReplicatesTheLocalBlock) {
  LoopbackCommunicator loop(world());
  EXPECT_EQ(loop.size(), world().size());
  std::vector<float> mine = {1.0f + static_cast<float>(world().rank()), 2.0f};
  std::vector<float> all(2 * static_cast<size_t>(world().size()), 0.0f);
  loop.all_gather(mine.data(), all.data(), 2, DType::f32);
  for (int r = 0; r < world().size(); ++r) {
    EXPECT_EQ(all[2 * r], mine[0]);
    EXPECT_EQ(all[2 * r + 1], mine[1]);
  }
}

TEST(FaultyCommunicator, DropRankBreaksOnlyTheReductions) {
  if (world().size() < 2) GTEST_SKIP() << "a dropped rank needs two";
  FaultyCommunicator faulty(world(), CommFault::drop_rank);
  double one = 1, sum = 0;
  faulty.all_reduce(&one, &sum, 1, DType::f64, ReduceOp::sum);
  EXPECT_EQ(sum, world().size() - 1.0);
  std::vector<double> mine = {static_cast<double>(world().rank())}, all(static_cast<size_t>(world().size()));
  faulty.all_gather(mine.data(), all.data(), 1, DType::f64);
  for (int r = 0; r < world().size(); ++r) EXPECT_EQ(all[r], r);
}

TEST(FaultyCommunicator, A2aOrderMovesPeerMemoryWritesToTheNextRank) {
  if (world().size() < 2) GTEST_SKIP() << "a misdelivery needs two ranks";
  FaultyCommunicator faulty(world(), CommFault::a2a_order);
  const int n = world().size(), r = world().rank();
  std::shared_ptr<PeerMemory> memory = faulty.peer_memory(sizeof(float) * n);
  ASSERT_TRUE(memory);
  std::vector<float> mine(n, -1.0f);
  std::memcpy(memory->at(r), mine.data(), sizeof(float) * n);
  memory->sync();
  for (int p = 0; p < n; ++p) reinterpret_cast<float*>(memory->at(p))[r] = static_cast<float>(r);
  memory->sync();
  std::memcpy(mine.data(), memory->at(r), sizeof(float) * n);
  EXPECT_EQ(mine[r], r) << "a rank's own part stays its own";
  const int prev = (r - 1 + n) % n;
  EXPECT_EQ(mine[prev], -1.0f) << "rank " << prev << "'s write went to the next rank";
  memory->sync();
}

TEST(CommFaults, EachShowsOnlyWhereItsOperationRuns) {
  const auto& t = comm_faults();
  EXPECT_TRUE(t.shows(CommFault::drop_rank, {{CommOp::reduce_scatter}, 2}));
  EXPECT_FALSE(t.shows(CommFault::drop_rank, {{CommOp::all_gather}, 2}));
  EXPECT_FALSE(t.shows(CommFault::drop_rank, {{CommOp::all_reduce}, 1}));
  EXPECT_TRUE(t.shows(CommFault::broadcast_root, {{CommOp::broadcast}, 4}));
  EXPECT_THROW(t.parse("no_such_fault"), UsageError);
  EXPECT_EQ(t.parse(""), CommFault::none);
}

}  // namespace
}  // namespace sextant
