#include "kernels/moe/permute.h"

#include <gtest/gtest.h>

#include "harness/error.h"

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

}  // namespace
}  // namespace sextant::moe
