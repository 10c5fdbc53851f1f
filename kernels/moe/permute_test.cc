#include "kernels/moe/permute.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "harness/error.h"
#include "harness/rng.h"
#include "harness/testing/gpu.h"

namespace sextant::moe {
namespace {

// Three tokens, top-2: slots (token, j) -> expert, prob, kept.
SlotTable table() {
  SlotTable s;
  s.tokens = 3;
  s.topk = 2;
  s.expert = {2, 0, 0, 1, 2, 0};
  s.prob = {0.75f, 0.25f, 0.5f, 0.5f, 0.625f, 0.375f};
  s.kept = {1, 1, 1, 1, 0, 1};  // token 2's first choice was dropped
  return s;
}

TEST(MoePermute, GroupsKeptSlotsByExpertInTokenOrder) {
  const Permutation p = group_by_expert(table(), 0, 3);
  EXPECT_EQ(p.slot, (std::vector<int64_t>{1, 2, 5, 3, 0}));  // expert 0: t0, t1, t2; expert 1: t1; expert 2: t0
  EXPECT_EQ(p.count, (std::vector<int64_t>{3, 1, 1}));
  EXPECT_EQ(p.offset, (std::vector<int64_t>{0, 3, 4, 5}));
  const Permutation local = group_by_expert(table(), 1, 2);  // experts 1 and 2 only
  EXPECT_EQ(local.slot, (std::vector<int64_t>{3, 0}));
}

TEST(MoePermute, UnpermuteWeightsEachRowAndSumsATokensRows) {
  const SlotTable s = table();
  const Permutation p = group_by_expert(s, 0, 3);
  const Tensor x = Tensor::from_values({3, 2}, {1, 2, 3, 4, 5, 6}, DType::f32);
  const Tensor rows = permute_rows(x, s, p);
  EXPECT_EQ(rows.to_vector(), (std::vector<double>{1, 2, 3, 4, 5, 6, 3, 4, 1, 2}));
  // y_t = x_t * (sum of t's kept probabilities)
  const Tensor y = unpermute_rows(rows, s, p, true);
  EXPECT_EQ(y.to_vector(), (std::vector<double>{1, 2, 3, 4, 5 * 0.375, 6 * 0.375}));
  const Tensor unweighted = unpermute_rows(rows, s, p, false);
  EXPECT_EQ(unweighted.to_vector(), (std::vector<double>{2, 4, 6, 8, 5, 6}));
  const Tensor weighted = permute_rows_weighted(x, s, p);
  EXPECT_EQ(weighted.to_vector(), (std::vector<double>{0.25, 0.5, 1.5, 2, 5 * 0.375, 6 * 0.375, 1.5, 2, 0.75, 1.5}));
}

TEST(MoePermute, WrongOrderFaultMisplacesRows) {
  const SlotTable s = table();
  const Permutation p = group_by_expert(s, 0, 3);
  const Tensor x = Tensor::from_values({3, 2}, {1, 2, 3, 4, 5, 6}, DType::f32);
  const Tensor rows = permute_rows(x, s, p);
  EXPECT_NE(unpermute_rows(rows, s, p, true, true).to_vector(), unpermute_rows(rows, s, p, true).to_vector());
}

TEST(MoePermute, RowDotsAreTheProbabilityGradient) {
  const SlotTable s = table();
  const Permutation p = group_by_expert(s, 0, 3);
  const Tensor dy = Tensor::from_values({3, 2}, {1, -1, 2, 0, 0, 3}, DType::f32);
  const Tensor rows = Tensor::from_values({5, 2}, {1, 1, 2, 2, 3, 3, 4, 4, 5, 5}, DType::f32);
  std::vector<float> dprob(6, 0.0f);
  accumulate_row_dots(dy, rows, s, p, dprob);
  // row r meets dy of its token: slot 1 (t0) <dy0, r0> = 0, slot 2 (t1) 4, slot 5 (t2) 9, slot 3 (t1) 8, slot 0 (t0) 0.
  EXPECT_EQ(dprob, (std::vector<float>{0, 0, 4, 8, 0, 9}));
}

TEST(MoePermute, CopyRowsChecksItsRange) {
  Tensor a = Tensor::zeros({2, 3}, DType::bf16), b = Tensor::zeros({2, 3}, DType::bf16);
  EXPECT_THROW(copy_rows(a, 1, b, 0, 2), RuntimeError);
  EXPECT_NO_THROW(copy_rows(a, 0, b, 0, 2));
}

// A random routing table: tokens x topk slots over `experts`, distinct experts
// per token, about one slot in five dropped.
SlotTable random_table(int64_t tokens, int topk, int experts, uint32_t seed) {
  std::mt19937 gen(seed);
  SlotTable s;
  s.tokens = tokens;
  s.topk = topk;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int32_t> order(static_cast<size_t>(experts));
    for (int e = 0; e < experts; ++e) order[e] = e;
    std::shuffle(order.begin(), order.end(), gen);
    for (int j = 0; j < topk; ++j) {
      s.expert.push_back(order[j]);
      s.prob.push_back(std::uniform_real_distribution<float>(0.05f, 1.0f)(gen));
      s.kept.push_back(gen() % 5 != 0);
    }
  }
  return s;
}

Tensor on_gpu(const Tensor& t) { return t.to(Device::cuda); }
std::vector<double> from_gpu(const Tensor& t) { return t.to(Device::host).to_vector(); }

// The device path of every row op against the host's: the gathers and the
// weighted combine bit for bit (same products and sums, in the same order),
// the row dots to f32 rounding (a warp sums in another order).
TEST(MoePermute, DeviceRowOpsMatchTheHost) {
  SEXTANT_REQUIRE_GPU();
  const SlotTable s = random_table(37, 2, 5, 7);
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = random_tensor({s.tokens, 19}, dtype, RandomSpec{1, tensor_id("moe.test.x"), 1.0});
    const Tensor dy = random_tensor({s.tokens, 19}, dtype, RandomSpec{1, tensor_id("moe.test.dy"), 1.0});
    for (const auto& [first, experts] : {std::pair{0, 5}, std::pair{2, 2}}) {
      const Permutation p = group_by_expert(s, first, experts);
      const Tensor rows = permute_rows(x, s, p);
      EXPECT_EQ(from_gpu(permute_rows(on_gpu(x), s, p)), rows.to_vector());
      EXPECT_EQ(from_gpu(permute_rows_weighted(on_gpu(x), s, p)), permute_rows_weighted(x, s, p).to_vector());
      for (bool probs : {true, false})
        for (bool wrong_order : {false, true})
          EXPECT_EQ(from_gpu(unpermute_rows(on_gpu(rows), s, p, probs, wrong_order)),
                    unpermute_rows(rows, s, p, probs, wrong_order).to_vector())
              << "probs " << probs << " wrong_order " << wrong_order;
      std::vector<float> want(static_cast<size_t>(s.slots()), 0.5f), got = want;
      accumulate_row_dots(dy, rows, s, p, want);
      accumulate_row_dots(on_gpu(dy), on_gpu(rows), s, p, got);
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
      Tensor host_dst = Tensor::zeros({rows.dim(0) + 3, 19}, dtype), gpu_dst = on_gpu(host_dst);
      copy_rows(rows, 1, host_dst, 2, rows.dim(0) - 1);
      copy_rows(on_gpu(rows), 1, gpu_dst, 2, rows.dim(0) - 1);
      EXPECT_EQ(from_gpu(gpu_dst), host_dst.to_vector());
    }
  }
}

}  // namespace
}  // namespace sextant::moe
