// The MPI communicator at 1, 2 and 4 ranks (run under mpiexec by ctest).
#include <gtest/gtest.h>

#include "harness/comm_mpi.h"
#include "harness/testing/comm_contract.h"
#include "harness/testing/mpi_world.h"

namespace sextant {
namespace {

using testing::world;

TEST(MpiCommunicator, AllReduceSumMaxInPlaceAndBf16) {
  MpiCommunicator& c = world();
  const int n = c.size(), r = c.rank();
  for (DType d : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    Tensor t = Tensor::from_values({3}, {1.0 * r, 2.0, -1.0 * r}, d);
    c.all_reduce(t, ReduceOp::sum);  // in place
    EXPECT_EQ(t.at(0), n * (n - 1) / 2.0) << dtype_name(d);
    EXPECT_EQ(t.at(1), 2.0 * n);
    Tensor m = Tensor::from_values({1}, {1.0 * r}, d);
    c.all_reduce(m, ReduceOp::max);
    EXPECT_EQ(m.at(0), n - 1.0);
  }
}

TEST(MpiCommunicator, ReduceScatterFollowsNcclInPlaceRule) {
  MpiCommunicator& c = world();
  const int n = c.size(), r = c.rank();
  std::vector<float> buf(2 * n);
  for (int i = 0; i < 2 * n; ++i) buf[i] = static_cast<float>(i + r);
  std::vector<float> out(2);
  c.reduce_scatter(buf.data(), out.data(), 2, DType::f32, ReduceOp::sum);
  for (int j = 0; j < 2; ++j) EXPECT_EQ(out[j], n * (2 * r + j) + n * (n - 1) / 2.0f);
  // In place: the result lands at this rank's block.
  c.reduce_scatter(buf.data(), buf.data() + 2 * r, 2, DType::f32, ReduceOp::sum);
  EXPECT_EQ(buf[2 * r], out[0]);
  EXPECT_EQ(buf[2 * r + 1], out[1]);
}

TEST(MpiCommunicator, AllGatherAllToAllBroadcastAndP2p) {
  MpiCommunicator& c = world();
  const int n = c.size(), r = c.rank();
  Tensor mine = Tensor::from_values({2}, {10.0 * r, 10.0 * r + 1}, DType::f32);
  Tensor all = Tensor::empty({2 * n}, DType::f32);
  c.all_gather(mine, all);
  for (int i = 0; i < 2 * n; ++i) EXPECT_EQ(all.at(i), 10.0 * (i / 2) + i % 2);
  Tensor send = Tensor::empty({n}, DType::f32), recv = Tensor::empty({n}, DType::f32);
  for (int p = 0; p < n; ++p) send.set(p, 100.0 * r + p);
  c.all_to_all(send, recv);
  for (int p = 0; p < n; ++p) EXPECT_EQ(recv.at(p), 100.0 * p + r);
  Tensor b = Tensor::from_values({1}, {r == 0 ? 42.0 : 0.0}, DType::f64);
  c.broadcast(b, 0);
  EXPECT_EQ(b.at(0), 42.0);
  float out = 1.5f * r, in = -1;
  std::vector<RequestPtr> reqs;
  reqs.push_back(c.irecv(&in, 1, DType::f32, (r - 1 + n) % n, 3));
  reqs.push_back(c.isend(&out, 1, DType::f32, (r + 1) % n, 3));
  wait_all(reqs);
  EXPECT_EQ(in, 1.5f * ((r - 1 + n) % n));
}

TEST(MpiCommunicator, AllToAllVUnevenAndStrings) {
  MpiCommunicator& c = world();
  const int n = c.size(), r = c.rank();
  // Rank r sends p+1 copies of r to peer p.
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t st = 0, rt = 0;
  for (int p = 0; p < n; ++p) {
    sc[p] = p + 1, sd[p] = st, st += sc[p];
    rc[p] = r + 1, rd[p] = rt, rt += rc[p];
  }
  std::vector<double> s(st, r), got(rt, -1);
  c.all_to_all_v(s.data(), sc, sd, got.data(), rc, rd, DType::f64);
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < rc[p]; ++k) EXPECT_EQ(got[rd[p] + k], p);
  std::vector<std::string> names = all_gather_strings(c, std::string(r, 'x') + "!");
  ASSERT_EQ(static_cast<int>(names.size()), n);
  for (int p = 0; p < n; ++p) EXPECT_EQ(names[p], std::string(p, 'x') + "!");
}

TEST(MpiCommunicator, SplitAndTrafficCounters) {
  MpiCommunicator& c = world();
  auto half = c.split(c.rank() % 2, c.rank());
  ASSERT_TRUE(half);
  EXPECT_EQ(half->size(), (c.size() + 1 - c.rank() % 2) / 2);
  auto none = c.split(-1, 0);
  EXPECT_EQ(none, nullptr);
  c.reset_stats();
  Tensor t = Tensor::zeros({1024}, DType::f32);
  c.all_reduce(t);
  EXPECT_EQ(c.stats().bytes_sent["all_reduce"], ring_bytes_sent(CommOp::all_reduce, 4096, c.size()));
  EXPECT_EQ(ring_bytes_sent(CommOp::all_reduce, 4096, 4), 2u * 4096 * 3 / 4);
  EXPECT_EQ(ring_bytes_sent(CommOp::all_gather, 4096, 4) + ring_bytes_sent(CommOp::reduce_scatter, 4096, 4),
            ring_bytes_sent(CommOp::all_reduce, 4096, 4))
      << "SP's AG + RS moves what the all-reduce moves";
}

// Each rank writes into every peer's part; after sync() every part holds
// what its writers put there, and a tensor viewing a part keeps it mapped.
TEST(MpiCommunicator, PeerMemoryIsSharedOnOneNode) {
  MpiCommunicator& c = world();
  const int n = c.size(), r = c.rank();
  std::shared_ptr<PeerMemory> memory = c.peer_memory(n * sizeof(float));
  ASSERT_TRUE(memory) << "the ranks of a ctest run share one node";
  EXPECT_EQ(memory->bytes(), n * sizeof(float));
  for (int p = 0; p < n; ++p) reinterpret_cast<float*>(memory->at(p))[r] = 100.0f * r + p;
  memory->sync();
  Tensor mine = Tensor::view_of(memory->at(r), {n}, DType::f32, Device::host, memory);
  memory.reset();  // unmapping is local: the view keeps this rank's mapping
  for (int s = 0; s < n; ++s) EXPECT_EQ(mine.data<float>()[s], 100.0f * s + r) << "written by rank " << s;
}

TEST(MpiCommunicator, MeetsTheContract) { testing::check_communicator_contract(world()); }

}  // namespace
}  // namespace sextant
