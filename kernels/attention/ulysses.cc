#include "kernels/attention/ulysses.h"

#include "harness/error.h"
#include "harness/strings.h"
#include "kernels/attention/permute.h"

namespace sextant::cp {

namespace {

int64_t heads_per_member(const Communicator& a2a, int64_t heads) {
  if (heads % a2a.size() != 0)
    throw RuntimeError(cat("ulysses: a2a group of ", a2a.size(), " cannot split ", heads, " heads"));
  return heads / a2a.size();
}

// All-to-all of a tensor whose leading dim indexes the peers.
Tensor exchange(Communicator& a2a, const Tensor& send) {
  Tensor recv = Tensor::empty(send.shape(), send.dtype(), send.device());
  a2a.all_to_all(send, recv);
  return recv;
}

}  // namespace

int64_t kv_replicas(int64_t a2a_size, int64_t kv_heads) {
  if (kv_heads > 0 && kv_heads % a2a_size == 0) return 1;
  if (kv_heads > 0 && a2a_size % kv_heads == 0) return a2a_size / kv_heads;
  throw RuntimeError(cat("ulysses: ", kv_heads, " KV heads neither split over nor replicate onto an a2a group of ",
                         a2a_size, " (one must divide the other)"));
}

Tensor replicate_kv_heads(const Tensor& x, int64_t r) {
  if (r == 1) return x;
  std::vector<Tensor> copies;
  for (int64_t h = 0; h < x.dim(2); ++h) {
    const Tensor head = narrow(x, 2, h, 1);
    for (int64_t j = 0; j < r; ++j) copies.push_back(head);
  }
  return concat(copies, 2);
}

Tensor sum_kv_replicas(const Tensor& g, int64_t r, bool first_only) {
  const Tensor g32 = g.dtype() == DType::f32 ? g : g.to(DType::f32);
  if (r == 1) return g32;
  const int64_t hk = g.dim(2) / r;
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < hk; ++h) {
    Tensor sum = narrow(g32, 2, h * r, 1);
    for (int64_t j = 1; j < r && !first_only; ++j) {
      add_into(sum, narrow(g32, 2, h * r + j, 1));
    }
    heads.push_back(sum);
  }
  return concat(heads, 2);
}

Tensor scatter_heads(Communicator& a2a, const Tensor& x, bool swapped) {
  const int64_t m = a2a.size(), b = x.dim(0), n = x.dim(1), hp = heads_per_member(a2a, x.dim(2)), d = x.dim(3);
  // block p of the send buffer: my n rows, heads of member p
  Tensor recv = exchange(a2a, permute_rows(x, {b, n, m, hp, d}, {2, 0, 1, 3, 4}));  // [A, b, n, hp, d]
  if (swapped)  // planted fault: the block is read as [hp, n]
    return permute_rows(recv, {m, b, hp, n, d}, {1, 0, 3, 2, 4}).reshape({b, m * n, hp, d});
  return permute_rows(recv, {m, b, n, hp, d}, {1, 0, 2, 3, 4}).reshape({b, m * n, hp, d});
}

Tensor gather_heads(Communicator& a2a, const Tensor& y) {
  const int64_t m = a2a.size(), b = y.dim(0), n = y.dim(1) / m, hp = y.dim(2), d = y.dim(3);
  // block p of the send buffer: member p's rows, my heads
  Tensor recv = exchange(a2a, permute_rows(y, {b, m, n, hp, d}, {1, 0, 2, 3, 4}));  // [A, b, n, hp, d]
  return permute_rows(recv, {m, b, n, hp, d}, {1, 2, 0, 3, 4}).reshape({b, n, m * hp, d});
}

Tensor scatter_heads_stat(Communicator& a2a, const Tensor& stat) {
  const int64_t m = a2a.size(), b = stat.dim(0), hp = heads_per_member(a2a, stat.dim(1)), n = stat.dim(2);
  Tensor recv = exchange(a2a, permute_rows(stat, {b, m, hp, n}, {1, 0, 2, 3}));  // [A, b, hp, n]
  return permute_rows(recv, {m, b, hp, n}, {1, 2, 0, 3}).reshape({b, hp, m * n});
}

Tensor gather_heads_stat(Communicator& a2a, const Tensor& stat) {
  const int64_t m = a2a.size(), b = stat.dim(0), hp = stat.dim(1), n = stat.dim(2) / m;
  Tensor recv = exchange(a2a, permute_rows(stat, {b, hp, m, n}, {2, 0, 1, 3}));  // [A, b, hp, n]
  return permute_rows(recv, {m, b, hp, n}, {1, 0, 2, 3}).reshape({b, m * hp, n});
}

}  // namespace sextant::cp
