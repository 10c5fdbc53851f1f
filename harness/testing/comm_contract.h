// The Communicator contract as GoogleTest checks, shared by the backends'
// tests (mpi-staged on host and GPU memory, nccl): every operation, NCCL's
// in-place forms, uneven all_to_all_v with empty blocks, grouped
// point-to-point, split, the traffic counters and the nonblocking collectives. Buffers live on
// comm.device(); values are small integers so every result is exact.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/comm.h"
#include "harness/tensor.h"

namespace sextant::testing {

// A tensor of `values` on `device`, and the values of one back.
inline Tensor on(Device device, const std::vector<double>& values, DType dtype = DType::f32) {
  return Tensor::from_values({static_cast<int64_t>(values.size())}, values, dtype).to(device);
}
inline std::vector<double> values_of(const Tensor& t) { return t.to(Device::host).to_vector(); }

inline void check_all_reduce(Communicator& c) {
  const int n = c.size(), r = c.rank();
  for (DType d : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    Tensor t = on(c.device(), {1.0 * r, 2.0, -1.0 * r}, d);
    c.all_reduce(t, ReduceOp::sum);  // in place
    EXPECT_EQ(values_of(t), (std::vector<double>{n * (n - 1) / 2.0, 2.0 * n, -n * (n - 1) / 2.0})) << dtype_name(d);
    Tensor send = on(c.device(), {1.0 * r, -1.0 * r}, d), recv = Tensor::zeros({2}, d, c.device());
    c.all_reduce(send.raw(), recv.raw(), 2, d, ReduceOp::max);
    EXPECT_EQ(values_of(recv), (std::vector<double>{n - 1.0, 0.0})) << dtype_name(d);
    c.all_reduce(send.raw(), recv.raw(), 2, d, ReduceOp::min);
    EXPECT_EQ(values_of(recv), (std::vector<double>{0.0, 1.0 - n})) << dtype_name(d);
    EXPECT_EQ(values_of(send), (std::vector<double>{1.0 * r, -1.0 * r})) << "input changed";
  }
}

inline void check_reduce_scatter(Communicator& c) {
  const int n = c.size(), r = c.rank();
  std::vector<double> in(2 * n);
  for (int i = 0; i < 2 * n; ++i) in[i] = i + r;
  std::vector<double> expected = {n * (2.0 * r) + n * (n - 1) / 2.0, n * (2.0 * r + 1) + n * (n - 1) / 2.0};
  Tensor send = on(c.device(), in), recv = Tensor::zeros({2}, DType::f32, c.device());
  c.reduce_scatter(send, recv);
  EXPECT_EQ(values_of(recv), expected);
  // In place (NCCL's rule): the result lands at this rank's block.
  c.reduce_scatter(send.raw(), static_cast<float*>(send.raw()) + 2 * r, 2, DType::f32, ReduceOp::sum);
  std::vector<double> got = values_of(send);
  EXPECT_EQ((std::vector<double>{got[2 * r], got[2 * r + 1]}), expected);
}

inline void check_all_gather(Communicator& c) {
  const int n = c.size(), r = c.rank();
  std::vector<double> expected(2 * n);
  for (int i = 0; i < 2 * n; ++i) expected[i] = 10.0 * (i / 2) + i % 2;
  Tensor mine = on(c.device(), {10.0 * r, 10.0 * r + 1}, DType::bf16);
  Tensor all = Tensor::zeros({2 * n}, DType::bf16, c.device());
  c.all_gather(mine, all);
  EXPECT_EQ(values_of(all), expected);
  // In place: this rank's block already sits in the output.
  std::vector<double> in_place(2 * n, -1.0);
  in_place[2 * r] = 10.0 * r;
  in_place[2 * r + 1] = 10.0 * r + 1;
  Tensor buffer = on(c.device(), in_place, DType::bf16);
  auto* base = static_cast<uint16_t*>(buffer.raw());
  c.all_gather(base + 2 * r, base, 2, DType::bf16);
  EXPECT_EQ(values_of(buffer), expected);
}

inline void check_all_to_all(Communicator& c) {
  const int n = c.size(), r = c.rank();
  std::vector<double> in(2 * n), expected(2 * n);
  for (int p = 0; p < n; ++p)
    for (int j = 0; j < 2; ++j) {
      in[2 * p + j] = 100.0 * r + 10.0 * p + j;        // block p goes to peer p
      expected[2 * p + j] = 100.0 * p + 10.0 * r + j;  // block p came from peer p
    }
  Tensor send = on(c.device(), in, DType::f64), recv = Tensor::zeros({2 * n}, DType::f64, c.device());
  c.all_to_all(send, recv);
  EXPECT_EQ(values_of(recv), expected);
}

// Rank `from` sends (from + 2 to) % 3 elements to `to`: 0, 1 or 2, so empty
// blocks occur; the receive buffer leaves a one-element gap after each block
// that must keep its contents.
inline void check_all_to_all_v(Communicator& c) {
  const int n = c.size(), r = c.rank();
  auto block = [](int from, int to) { return static_cast<size_t>((from + 2 * to) % 3); };
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  std::vector<double> in;
  for (int p = 0; p < n; ++p) {
    sc[p] = block(r, p);
    sd[p] = in.size();
    for (size_t j = 0; j < sc[p]; ++j) in.push_back(1000.0 * r + 10.0 * p + j);
  }
  std::vector<double> expected;
  for (int p = 0; p < n; ++p) {
    rc[p] = block(p, r);
    rd[p] = expected.size();
    for (size_t j = 0; j < rc[p]; ++j) expected.push_back(1000.0 * p + 10.0 * r + j);
    expected.push_back(-7.0);  // the gap
  }
  in.push_back(0.0);  // never empty
  Tensor send = on(c.device(), in), recv = on(c.device(), std::vector<double>(expected.size(), -7.0));
  c.all_to_all_v(send.raw(), sc, sd, recv.raw(), rc, rd, DType::f32);
  EXPECT_EQ(values_of(recv), expected);
}

inline void check_broadcast(Communicator& c) {
  const int root = c.size() - 1;
  Tensor b = on(c.device(), {c.rank() == root ? 42.0 : 0.0, c.rank() == root ? -3.0 : 5.0}, DType::f16);
  c.broadcast(b, root);
  EXPECT_EQ(values_of(b), (std::vector<double>{42.0, -3.0}));
}

// Both neighbours at once in one group: without the group NCCL deadlocks.
inline void check_grouped_send_recv(Communicator& c) {
  const int n = c.size(), r = c.rank(), next = (r + 1) % n, prev = (r - 1 + n) % n;
  Tensor to_next = on(c.device(), {1.0 * r, 0.5}), to_prev = on(c.device(), {-1.0 * r, 0.25});
  Tensor from_prev = Tensor::zeros({2}, DType::f32, c.device()), from_next = Tensor::zeros({2}, DType::f32, c.device());
  std::vector<RequestPtr> requests;
  c.group_start();
  requests.push_back(c.irecv(from_prev.raw(), 2, DType::f32, prev, 1));
  requests.push_back(c.irecv(from_next.raw(), 2, DType::f32, next, 2));
  requests.push_back(c.isend(to_next.raw(), 2, DType::f32, next, 1));
  requests.push_back(c.isend(to_prev.raw(), 2, DType::f32, prev, 2));
  c.group_end();
  wait_all(requests);
  EXPECT_EQ(values_of(from_prev), (std::vector<double>{1.0 * prev, 0.5}));
  EXPECT_EQ(values_of(from_next), (std::vector<double>{-1.0 * next, 0.25}));
}

// Even and odd ranks, ordered by descending rank: new rank = position in that order.
inline void check_split(Communicator& c) {
  const int n = c.size(), r = c.rank();
  std::unique_ptr<Communicator> sub = c.split(r % 2, n - r);
  ASSERT_NE(sub, nullptr);
  const int members = (n - r % 2 + 1) / 2;
  EXPECT_EQ(sub->size(), members);
  int above = 0;  // same-colour ranks above r come first
  for (int q = r + 2; q < n; q += 2) ++above;
  EXPECT_EQ(sub->rank(), above);
  EXPECT_EQ(sub->backend(), c.backend());
  EXPECT_EQ(sub->device(), c.device());
  EXPECT_EQ(sub->all_reduce_count(1), members);
  std::unique_ptr<Communicator> none = c.split(r == 0 ? -1 : 0, r);
  EXPECT_EQ(none == nullptr, r == 0);
  if (none) {
    EXPECT_EQ(none->size(), n - 1);
  }
}

// Counters follow the MPI backend's ring convention (CommStats).
inline void check_traffic_counters(Communicator& c) {
  const int n = c.size();
  c.reset_stats();
  Tensor t = Tensor::zeros({64}, DType::f32, c.device());
  c.all_reduce(t);
  Tensor one = Tensor::zeros({4}, DType::f32, c.device());
  std::vector<RequestPtr> requests;
  c.group_start();
  requests.push_back(c.irecv(one.raw(), 2, DType::f32, (c.rank() - 1 + n) % n, 0));
  requests.push_back(c.isend(static_cast<float*>(one.raw()) + 2, 2, DType::f32, (c.rank() + 1) % n, 0));
  c.group_end();
  wait_all(requests);
  EXPECT_EQ(c.stats().bytes_sent["all_reduce"], ring_bytes_sent(CommOp::all_reduce, 256, n));
  EXPECT_EQ(c.stats().calls["all_reduce"], 1u);
  EXPECT_EQ(c.stats().bytes_sent["send"], 8u);
  c.reset_stats();
  EXPECT_EQ(c.stats().total_bytes(), 0u);
}

// The nonblocking collectives: several outstanding at once on one group,
// completed by test() or wait() in another order than issued; the same
// results and in-place rules as the blocking calls.
inline void check_nonblocking_collectives(Communicator& c) {
  const int n = c.size(), r = c.rank();
  Tensor sum = on(c.device(), {1.0 * r, 2.0}, DType::f32);
  Tensor sum_out = Tensor::zeros({2}, DType::f32, c.device());
  Tensor in_place = on(c.device(), {1.0, -1.0 * r}, DType::bf16);
  std::vector<double> blocks(2 * n);
  for (int i = 0; i < 2 * n; ++i) blocks[i] = i + r;
  Tensor scatter = on(c.device(), blocks), scatter_out = Tensor::zeros({2}, DType::f32, c.device());
  Tensor scatter_in_place = on(c.device(), blocks);
  Tensor mine = on(c.device(), {10.0 * r, 10.0 * r + 1}, DType::f64);
  Tensor gathered = Tensor::zeros({2 * n}, DType::f64, c.device());
  std::vector<double> own(2 * n, -1.0);
  own[2 * r] = 10.0 * r, own[2 * r + 1] = 10.0 * r + 1;
  Tensor gathered_in_place = on(c.device(), own, DType::f64);
  auto* gip = static_cast<double*>(gathered_in_place.raw());
  auto* sip = static_cast<float*>(scatter_in_place.raw());

  std::vector<RequestPtr> requests;
  requests.push_back(c.iall_reduce(sum.raw(), sum_out.raw(), 2, DType::f32, ReduceOp::sum));
  requests.push_back(c.iall_reduce(in_place.raw(), in_place.raw(), 2, DType::bf16, ReduceOp::max));
  requests.push_back(c.ireduce_scatter(scatter.raw(), scatter_out.raw(), 2, DType::f32, ReduceOp::sum));
  requests.push_back(c.ireduce_scatter(sip, sip + 2 * r, 2, DType::f32, ReduceOp::sum));
  requests.push_back(c.iall_gather(mine.raw(), gathered.raw(), 2, DType::f64));
  requests.push_back(c.iall_gather(gip + 2 * r, gip, 2, DType::f64));
  // The last one tested until done (a test must let it advance), then the rest, last first.
  while (!requests.back()->test()) {
  }
  EXPECT_TRUE(requests.back()->test()) << "a completed request stays complete";
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) (*it)->wait();

  EXPECT_EQ(values_of(sum_out), (std::vector<double>{n * (n - 1) / 2.0, 2.0 * n}));
  EXPECT_EQ(values_of(sum), (std::vector<double>{1.0 * r, 2.0})) << "input changed";
  EXPECT_EQ(values_of(in_place), (std::vector<double>{1.0, 0.0}));
  const std::vector<double> scattered = {n * (2.0 * r) + n * (n - 1) / 2.0, n * (2.0 * r + 1) + n * (n - 1) / 2.0};
  EXPECT_EQ(values_of(scatter_out), scattered);
  const std::vector<double> sip_all = values_of(scatter_in_place);
  EXPECT_EQ((std::vector<double>{sip_all[2 * r], sip_all[2 * r + 1]}), scattered) << "in place: at this rank's block";
  std::vector<double> expected(2 * n);
  for (int i = 0; i < 2 * n; ++i) expected[i] = 10.0 * (i / 2) + i % 2;
  EXPECT_EQ(values_of(gathered), expected);
  EXPECT_EQ(values_of(gathered_in_place), expected);
}

inline void check_communicator_contract(Communicator& c) {
  check_all_reduce(c);
  check_reduce_scatter(c);
  check_all_gather(c);
  check_all_to_all(c);
  check_all_to_all_v(c);
  check_broadcast(c);
  check_grouped_send_recv(c);
  check_split(c);
  check_traffic_counters(c);
  check_nonblocking_collectives(c);
  c.barrier();
}

}  // namespace sextant::testing
