#include "reference/embedding.h"

#include <gtest/gtest.h>

#include <vector>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/rng.h"
#include "reference/testing/gradcheck.h"

namespace sextant::ref {
namespace {

TEST(RefEmbedding, ForwardGathersRows) {
  Tensor table = Tensor::from_values({3, 2}, {0, 1, 10, 11, 20, 21}, DType::f64);
  std::vector<int64_t> ids{2, 0, 2};
  EXPECT_EQ(embedding_forward(ids, table).to_vector(), (std::vector<double>{20, 21, 0, 1, 20, 21}));
}

TEST(RefEmbedding, BackwardMatchesFiniteDifferences) {
  // Repeated ids: their gradients must add up.
  Tensor table = random_tensor({5, 3}, DType::f64, {4, tensor_id("table")});
  std::vector<int64_t> ids{1, 4, 1, 0, 1};
  Tensor dy = random_tensor({5, 3}, DType::f64, {4, tensor_id("dy")});
  auto loss = [&](const Tensor& v) { return dot(dy, embedding_forward(ids, v)); };
  EXPECT_LT(compare(embedding_backward(ids, dy, 5), numeric_gradient(loss, table)).rel_l2, kGradcheckTolerance);
}

TEST(RefEmbedding, RejectsIdsOutsideTheVocab) {
  std::vector<int64_t> ids{3};
  EXPECT_THROW(embedding_forward(ids, Tensor::zeros({3, 2}, DType::f64)), RuntimeError);
}

}  // namespace
}  // namespace sextant::ref
