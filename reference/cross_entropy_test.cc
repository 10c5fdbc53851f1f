#include "reference/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "reference/testing/gradcheck.h"

namespace sextant::ref {
namespace {

TEST(RefCrossEntropy, ForwardMatchesHandComputedLosses) {
  // Row 0: uniform over 2 -> log 2. Row 1: logits [0, ln 3], target 1 -> log(4/3).
  Tensor logits = Tensor::from_values({2, 2}, {0, 0, 0, std::log(3.0)}, DType::f64);
  std::vector<int64_t> targets{0, 1};
  const double expected_sum = std::log(2.0) + std::log(4.0 / 3.0);
  EXPECT_NEAR(cross_entropy_forward(logits, targets, Reduction::sum), expected_sum, 1e-15);
  EXPECT_NEAR(cross_entropy_forward(logits, targets, Reduction::mean), expected_sum / 2, 1e-15);
}

TEST(RefCrossEntropy, BackwardMatchesFiniteDifferences) {
  Tensor logits = random_tensor({2, 3, 6}, DType::f64, {9, tensor_id("logits"), 3.0});
  std::vector<int64_t> targets{0, 5, 2, 2, 1, 4};
  for (Reduction reduction : {Reduction::mean, Reduction::sum}) {
    auto loss = [&](const Tensor& v) { return 0.7 * cross_entropy_forward(v, targets, reduction); };
    EXPECT_LT(compare(cross_entropy_backward(logits, targets, reduction, 0.7), numeric_gradient(loss, logits)).rel_l2,
              kGradcheckTolerance);
  }
}

// Ignored rows (padding): the loss is the loss of the other rows alone (a
// mean over them), and the ignored rows' gradient is zero.
TEST(RefCrossEntropy, IgnoredRowsAddNothing) {
  Tensor logits = random_tensor({4, 5}, DType::f64, {9, tensor_id("logits"), 3.0});
  const std::vector<int64_t> targets{2, kIgnoreTarget, 4, kIgnoreTarget}, kept{2, 4};
  Tensor rows = Tensor::empty({2, 5}, DType::f64);
  for (int64_t j = 0; j < 5; ++j) rows.set(j, logits.at(j)), rows.set(5 + j, logits.at(10 + j));
  for (Reduction reduction : {Reduction::mean, Reduction::sum}) {
    EXPECT_NEAR(cross_entropy_forward(logits, targets, reduction), cross_entropy_forward(rows, kept, reduction), 1e-15);
    const Tensor d = cross_entropy_backward(logits, targets, reduction, 0.7);
    const Tensor want = cross_entropy_backward(rows, kept, reduction, 0.7);
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(d.at(5 + j), 0.0);
      EXPECT_EQ(d.at(15 + j), 0.0);
      EXPECT_NEAR(d.at(j), want.at(j), 1e-15);
      EXPECT_NEAR(d.at(10 + j), want.at(5 + j), 1e-15);
    }
  }
  EXPECT_EQ(cross_entropy_row_loss(logits, targets).at(1), 0.0);
}

TEST(RefCrossEntropy, RejectsTargetsOutsideTheVocab) {
  Tensor logits = Tensor::zeros({2, 4}, DType::f64);
  std::vector<int64_t> bad{0, 4}, negative{0, -2};
  EXPECT_THROW(cross_entropy_forward(logits, bad, Reduction::sum), RuntimeError);
  EXPECT_THROW(cross_entropy_forward(logits, negative, Reduction::sum), RuntimeError);
}

}  // namespace
}  // namespace sextant::ref
