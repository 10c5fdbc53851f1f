// The TP-region edges on small integer tensors, where every sum is exact:
// the sequence all-gather and reduce-scatter put each token where SP says,
// the SP and all-reduce paths give the same values and move the same bytes,
// and the layout helpers round-trip.
#include "kernels/tensor_parallel/regions.h"

#include <gtest/gtest.h>

#include "harness/testing/mpi_world.h"
#include "kernels/tensor_parallel/shard.h"

namespace sextant::tp {
namespace {

using testing::world;

// Rank r's contribution at [b, t, j]: a small integer, so sums are exact in f32.
double value(int rank, int64_t b, int64_t t, int64_t j) {
  return static_cast<double>((rank * 7 + b * 5 + t * 3 + j) % 11) - 5;
}

Tensor filled(const Shape& shape, int64_t t0, const std::function<double(int64_t, int64_t, int64_t)>& f) {
  Tensor x = Tensor::empty(shape, DType::f32);
  for (int64_t b = 0; b < shape[0]; ++b)
    for (int64_t t = 0; t < shape[1]; ++t)
      for (int64_t j = 0; j < shape[2]; ++j) x.set((b * shape[1] + t) * shape[2] + j, f(b, t0 + t, j));
  return x;
}

constexpr int64_t kBatch = 3, kHidden = 4;  // batch > 1: the sequence is not the contiguous dimension

TEST(Regions, GatherSequencePutsEachShardAtItsTokens) {
  const int n = world().size(), r = world().rank();
  const int64_t local = 2, seq = local * n;
  Tensor shard =
      filled({kBatch, local, kHidden}, r * local, [](int64_t b, int64_t t, int64_t j) { return value(0, b, t, j); });
  Tensor full = gather_sequence(world(), shard);
  Tensor expected =
      filled({kBatch, seq, kHidden}, 0, [](int64_t b, int64_t t, int64_t j) { return value(0, b, t, j); });
  EXPECT_EQ(full.to_vector(), expected.to_vector());
}

TEST(Regions, ReduceScatterSequenceSumsAndKeepsThisRanksTokens) {
  const int n = world().size(), r = world().rank();
  const int64_t local = 2, seq = local * n;
  Tensor full = filled({kBatch, seq, kHidden}, 0, [&](int64_t b, int64_t t, int64_t j) { return value(r, b, t, j); });
  Tensor shard = reduce_scatter_sequence(world(), full);
  Tensor expected = filled({kBatch, local, kHidden}, r * local, [&](int64_t b, int64_t t, int64_t j) {
    double sum = 0;
    for (int p = 0; p < n; ++p) sum += value(p, b, t, j);
    return sum;
  });
  EXPECT_EQ(shard.to_vector(), expected.to_vector());
}

TEST(Regions, TheWrongDimensionFaultScattersTheHiddenDimension) {
  const int n = world().size(), r = world().rank();
  if (n == 1) GTEST_SKIP() << "a reduce-scatter over one rank has no dimension to get wrong";
  Tensor full = filled({kBatch, 2 * n, kHidden}, 0, [&](int64_t b, int64_t t, int64_t j) { return value(r, b, t, j); });
  Tensor good = reduce_scatter_sequence(world(), full);
  Tensor bad = reduce_scatter_sequence(world(), full, Fault::reduce_scatter_wrong_dim);
  EXPECT_EQ(bad.shape(), good.shape());
  EXPECT_NE(bad.to_vector(), good.to_vector());
}

// SP (all-gather in, reduce-scatter out) against f/g (identity in, all-reduce
// out) over one TP region, forward and backward: the same values on every
// token this rank holds, and the same bytes sent.
TEST(Regions, SequenceParallelMatchesTheAllReducePathAndItsBytes) {
  const int n = world().size(), r = world().rank();
  const int64_t local = 2, seq = local * n;
  auto contribution = [&](int64_t b, int64_t t, int64_t j) { return value(r, b, t, j); };
  auto upstream = [](int64_t b, int64_t t, int64_t j) { return value(3, b, t, j); };
  std::map<bool, uint64_t> bytes;
  std::map<bool, std::vector<Tensor>> results;
  for (bool sp : {false, true}) {
    world().reset_stats();
    TpGroup g{world(), sp};
    const int64_t t0 = sp ? r * local : 0, rows = sp ? local : seq;
    Tensor y = exit_region_forward(g, filled({kBatch, seq, kHidden}, 0, contribution));  // summed
    Tensor dy = exit_region_backward(g, filled({kBatch, rows, kHidden}, t0, upstream));  // [b, s, h]
    Tensor x = enter_region_forward(g, filled({kBatch, rows, kHidden}, t0, upstream));   // [b, s, h]
    Tensor dx = enter_region_backward(g, filled({kBatch, seq, kHidden}, 0, contribution));
    bytes[sp] = world().stats().total_bytes();
    // Compare on this rank's tokens.
    results[sp] = {sp ? y : chunk(y, 1, n, r), dy, x, sp ? dx : chunk(dx, 1, n, r)};
  }
  for (size_t i = 0; i < results[false].size(); ++i)
    EXPECT_EQ(results[true][i].to_vector(), results[false][i].to_vector()) << "tensor " << i;
  EXPECT_EQ(bytes[true], bytes[false]);
  if (n > 1) {
    EXPECT_GT(bytes[true], 0u);
  }
}

TEST(Shard, SplitAndMergeRoundTripAlongAnyDimension) {
  Tensor x = filled({2, 6, 4}, 0, [](int64_t b, int64_t t, int64_t j) { return value(1, b, t, j) + 0.5 * t; });
  for (int dim : {0, 1, 2}) {
    for (int n : {1, 2}) {
      Tensor parts = split_dim_to_front(x, dim, n);
      EXPECT_EQ(parts.dim(0), n);
      Tensor back = merge_front_into_dim(parts, dim);
      EXPECT_EQ(back.shape(), x.shape());
      EXPECT_EQ(back.to_vector(), x.to_vector()) << "dim " << dim << " n " << n;
      // Block r of the split is part r of dim.
      EXPECT_EQ(chunk(parts, 0, n, n - 1).reshape(chunk(x, dim, n, n - 1).shape()).to_vector(),
                chunk(x, dim, n, n - 1).to_vector());
    }
  }
}

}  // namespace
}  // namespace sextant::tp
