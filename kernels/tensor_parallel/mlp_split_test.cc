// The zero-bubble split of the MLP block's backward under MPI (1, 2 and 4
// ranks, TP over the world, SP off and on, regather on and off): I then W
// gives bit for bit what the fused mlp_backward gives, and accumulating the
// gradients of several microbatches gives their sum. With FP8 linears too:
// the split casts the same tensors with the same scales.
#include <gtest/gtest.h>

#include <optional>

#include "harness/strings.h"
#include "harness/testing/mpi_world.h"
#include "kernels/tensor_parallel/mlp.h"
#include "kernels/tensor_parallel/shard.h"

namespace sextant::tp {
namespace {

using testing::world;

constexpr int64_t kBatch = 2, kSeq = 8, kHidden = 12, kFfn = 16;

struct Backward {
  Tensor dx;
  MlpGrads grads;
};

// This rank's activations: [b, s/tp, h] under SP, [b, s, h] otherwise.
Tensor activation(const TpGroup& g, const char* name, int microbatch) {
  const int64_t local = g.local_seq(kSeq);
  return random_block({kBatch, kSeq, kHidden}, {0, local * (g.sp() ? g.rank() : 0), 0}, {kBatch, local, kHidden},
                      DType::f32, RandomSpec{static_cast<uint64_t>(microbatch), tensor_id(name), 1.0});
}

// fp8: the linears' recipe, or none for f32 linears.
MlpWeights weights(const TpGroup& g, const std::optional<ops::Fp8Recipe>& fp8 = std::nullopt) {
  MlpWeights w = init_mlp_weights({kHidden, kFfn}, g.rank(), g.size(), DType::f32, 5, "mlp_split_test");
  if (fp8) use_fp8_linears(w, *fp8);
  return w;
}

Backward fused(const TpGroup& g, int microbatch, const std::optional<ops::Fp8Recipe>& fp8 = std::nullopt) {
  const MlpWeights w = weights(g, fp8);
  MlpSaved saved;
  mlp_forward(g, w, activation(g, "x", microbatch), saved);
  Backward r;
  r.dx = mlp_backward(g, w, saved, activation(g, "dy", microbatch), r.grads);
  return r;
}

Backward split(const TpGroup& g, int microbatch, const std::optional<ops::Fp8Recipe>& fp8 = std::nullopt) {
  const MlpWeights w = weights(g, fp8);
  MlpSaved saved;
  mlp_forward(g, w, activation(g, "x", microbatch), saved);
  Backward r;
  MlpPendingGrads pending;
  r.dx = mlp_backward_input(g, w, saved, activation(g, "dy", microbatch), pending);
  saved.ln = {};  // W must not need what only I reads
  saved.a = Tensor();
  mlp_backward_weight(g, w, saved, pending, r.grads);
  return r;
}

std::vector<TpGroup> groups() {
  return {TpGroup{world(), false}, TpGroup{world(), true, true}, TpGroup{world(), true, false}};
}

TEST(MlpSplit, InputThenWeightEqualsTheFusedBackwardBitForBit) {
  const std::vector<std::optional<ops::Fp8Recipe>> precisions = {
      std::nullopt, ops::default_fp8_recipe(ops::Fp8Scaling::current), ops::default_fp8_recipe(ops::Fp8Scaling::block)};
  for (const std::optional<ops::Fp8Recipe>& fp8 : precisions)
    for (const TpGroup& g : groups()) {
      const std::string where = cat("sp ", g.sequence_parallel, " fp8 ", fp8 ? fp8->name() : "none");
      Backward a = fused(g, 0, fp8), b = split(g, 0, fp8);
      EXPECT_EQ(a.dx.to_vector(), b.dx.to_vector()) << where;
      std::vector<Tensor*> ga = a.grads.all(), gb = b.grads.all();
      for (size_t i = 0; i < ga.size(); ++i) {
        ASSERT_TRUE(gb[i]->defined()) << "gradient " << i;
        EXPECT_EQ(ga[i]->to_vector(), gb[i]->to_vector()) << "gradient " << i << " " << where;
      }
    }
}

TEST(MlpSplit, AccumulatedGradientsAreTheSumOverMicrobatches) {
  const TpGroup g{world(), true};
  MlpGrads sum;
  Backward first = split(g, 0), second = split(g, 1);
  accumulate_grads(sum, first.grads);
  accumulate_grads(sum, second.grads);
  std::vector<Tensor*> s = sum.all(), a = first.grads.all(), b = second.grads.all();
  for (size_t i = 0; i < s.size(); ++i) {
    std::vector<double> got = s[i]->to_vector(), x = a[i]->to_vector(), y = b[i]->to_vector();
    ASSERT_EQ(got.size(), x.size());
    for (size_t k = 0; k < got.size(); ++k)  // f32 sum of two f32 values, rounded once
      EXPECT_EQ(got[k], static_cast<double>(static_cast<float>(x[k]) + static_cast<float>(y[k])));
  }
  EXPECT_NE(s[2]->data<float>(), a[2]->data<float>()) << "the first microbatch's tensor was adopted, not copied";
  zero_grads(sum);
  for (Tensor* t : sum.all())
    for (double v : t->to_vector()) EXPECT_EQ(v, 0.0);
}

}  // namespace
}  // namespace sextant::tp
