#include "kernels/ops/cross_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops/op_testing.h"
#include "reference/cross_entropy.h"

namespace sextant::ops {
namespace {

using testing::kTestDtypes;
using testing::matches_reference;
using testing::random_input;

std::vector<int64_t> targets_for(int64_t rows, int64_t vocab) {
  std::vector<int64_t> t(rows);
  for (int64_t r = 0; r < rows; ++r) t[r] = (r * 7 + 3) % vocab;
  return t;
}

ref::Reduction to_ref(LossReduction r) { return r == LossReduction::mean ? ref::Reduction::mean : ref::Reduction::sum; }

double rel_error(double x, double ref) { return std::abs(x - ref) / std::abs(ref); }

// With padding positions too: rows whose target is kIgnoreTarget have loss
// and gradient exactly 0, and a mean divides by the other rows, as the reference.
TEST(CrossEntropy, LossAndGradientMatchTheReference) {
  testing::for_each_lane_width([&](int lanes) {
    SCOPED_TRACE(::testing::Message() << "lanes " << lanes);
    const int64_t vocab = 83;
    for (DType d : kTestDtypes)
      for (LossReduction reduction : {LossReduction::mean, LossReduction::sum})
        for (bool padding : {false, true}) {
          Tensor logits = random_input({2, 6, vocab}, d, "ce.logits", 4.0);
          std::vector<int64_t> targets = targets_for(12, vocab);
          const std::vector<int64_t> ignored = padding ? std::vector<int64_t>{0, 5, 6, 11} : std::vector<int64_t>{};
          for (int64_t r : ignored) targets[r] = kIgnoreTarget;
          CrossEntropyForward fwd = cross_entropy_forward(logits, targets, reduction);
          Tensor dlogits = Tensor::empty(logits.shape(), d);
          cross_entropy_backward(logits, targets, fwd.stats, reduction, 0.7f, dlogits);
          const double ref_loss = ref::cross_entropy_forward(logits, targets, to_ref(reduction));
          EXPECT_LE(rel_error(fwd.loss, ref_loss), baseline_gate(d, OpClass::loss)) << dtype_name(d);
          EXPECT_TRUE(matches_reference(dlogits, ref::cross_entropy_backward(logits, targets, to_ref(reduction), 0.7),
                                        d, OpClass::softmax));
          const Tensor row_loss = cross_entropy_row_loss(fwd.stats, targets);
          for (int64_t r : ignored) {
            EXPECT_EQ(row_loss.at(r), 0.0) << dtype_name(d);
            for (int64_t j = 0; j < vocab; ++j)
              ASSERT_EQ(dlogits.at(r * vocab + j), 0.0) << dtype_name(d) << " row " << r;
          }
        }
  });
}

TEST(CrossEntropy, RowLossesMatchTheReference) {
  Tensor logits = random_input({10, 40}, DType::bf16, "ce.logits", 4.0);
  const std::vector<int64_t> targets = targets_for(10, 40);
  CrossEntropyForward fwd = cross_entropy_forward(logits, targets, LossReduction::sum);
  EXPECT_TRUE(matches_reference(cross_entropy_row_loss(fwd.stats), ref::cross_entropy_row_loss(logits, targets),
                                DType::f32, OpClass::loss));
}

// Vocab-parallel use: three slices of the vocabulary combined by hand the way
// the TP ranks combine them with all-reduces.
struct Sliced {
  std::vector<Tensor> slices;
  std::vector<int64_t> starts;
};
Sliced slice_vocab(const Tensor& logits, int parts) {
  Sliced s;
  for (int p = 0; p < parts; ++p) {
    s.slices.push_back(chunk(logits, 1, parts, p));
    s.starts.push_back(p * logits.dim(1) / parts);
  }
  return s;
}

CrossEntropyStats combine(const Sliced& s, const std::vector<int64_t>& targets, bool all_reduce_max) {
  const int64_t rows = s.slices[0].dim(0);
  CrossEntropyStats stats{Tensor::zeros({rows}, DType::f32), Tensor::zeros({rows}, DType::f32),
                          Tensor::zeros({rows}, DType::f32)};
  std::vector<Tensor> maxes;
  for (const Tensor& slice : s.slices) maxes.push_back(cross_entropy_row_max(slice));
  for (int64_t r = 0; r < rows; ++r) {  // all_reduce(MAX)
    double m = maxes[0].at(r);
    for (const Tensor& mx : maxes) m = std::max(m, mx.at(r));
    stats.max.set(r, m);
  }
  for (size_t p = 0; p < s.slices.size(); ++p) {  // all_reduce(SUM) of sum_exp and target logit
    Tensor se = cross_entropy_sum_exp(s.slices[p], all_reduce_max ? stats.max : maxes[p]);
    Tensor tl = cross_entropy_target_logit(s.slices[p], targets, s.starts[p]);
    for (int64_t r = 0; r < rows; ++r) {
      stats.sum_exp.set(r, stats.sum_exp.at(r) + se.at(r));
      stats.target_logit.set(r, stats.target_logit.at(r) + tl.at(r));
    }
  }
  return stats;
}

TEST(CrossEntropy, VocabSlicesCombineToTheWholeVocabulary) {
  const int64_t rows = 8, vocab = 60;
  Tensor logits = random_input({rows, vocab}, DType::f32, "ce.logits", 6.0);
  const std::vector<int64_t> targets = targets_for(rows, vocab);
  const Sliced s = slice_vocab(logits, 3);
  const CrossEntropyStats stats = combine(s, targets, true);
  const double ref_loss = ref::cross_entropy_forward(logits, targets, ref::Reduction::mean);
  EXPECT_LE(rel_error(cross_entropy_loss(stats, LossReduction::mean), ref_loss),
            baseline_gate(DType::f32, OpClass::loss));
  std::vector<Tensor> grads;
  for (size_t p = 0; p < s.slices.size(); ++p) {
    grads.push_back(Tensor::empty(s.slices[p].shape(), DType::f32));
    cross_entropy_backward(s.slices[p], targets, stats, LossReduction::mean, 1.0f, grads.back(), s.starts[p]);
  }
  EXPECT_TRUE(matches_reference(concat(grads, 1), ref::cross_entropy_backward(logits, targets, ref::Reduction::mean),
                                DType::f32, OpClass::softmax));
}

TEST(CrossEntropy, SlicesWithoutTheMaxAllReduceGiveAWrongLoss) {
  // The tp_sp planted fault: each slice shifts by its own max.
  const int64_t rows = 8, vocab = 60;
  Tensor logits = random_input({rows, vocab}, DType::f32, "ce.logits", 6.0);
  const std::vector<int64_t> targets = targets_for(rows, vocab);
  const CrossEntropyStats stats = combine(slice_vocab(logits, 3), targets, false);
  const double ref_loss = ref::cross_entropy_forward(logits, targets, ref::Reduction::mean);
  EXPECT_GT(rel_error(cross_entropy_loss(stats, LossReduction::mean), ref_loss),
            baseline_gate(DType::f32, OpClass::loss));
}

TEST(CrossEntropy, BadTargetsAreClearErrors) {
  Tensor logits = Tensor::zeros({3, 5}, DType::f32);
  const std::vector<int64_t> too_few{0, 1}, negative{0, -2, 2}, outside{0, 5, 1};  // -1 is the ignore index
  EXPECT_TRUE(testing::throws_naming([&] { cross_entropy_forward(logits, too_few, LossReduction::sum); },
                                     "2 targets for logits [3, 5]"));
  EXPECT_TRUE(testing::throws_naming([&] { cross_entropy_forward(logits, negative, LossReduction::sum); },
                                     "target -2 of row 1 is negative (and not the ignore index -1)"));
  EXPECT_TRUE(testing::throws_naming([&] { cross_entropy_forward(logits, outside, LossReduction::sum); },
                                     "target 5 of row 1 is outside the vocab 5"));
}

}  // namespace
}  // namespace sextant::ops
