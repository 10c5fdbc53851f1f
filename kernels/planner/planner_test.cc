#include "kernels/planner/planner.h"

#include <gtest/gtest.h>

#include "harness/error.h"

namespace sextant::plan {
namespace {

Config make(int tp, int cp, int pp, int dp, int ep = 1, int etp = 1, int vpp = 1) {
  Config c;
  c.tp = tp, c.cp = cp, c.pp = pp, c.dp = dp, c.ep = ep, c.etp = etp, c.vpp = vpp, c.sp = tp > 1;
  return c;
}

// Is `want` (ignoring recompute/vpp) among the fitting configs of the search?
bool search_finds(const ModelSpec& m, const ClusterSpec& c, const TrainSpec& t, Config want) {
  for (const Estimate& e : search(m, c, t)) {
    const Config& g = e.config;
    if (e.fits && g.tp == want.tp && g.cp == want.cp && g.pp == want.pp && g.dp == want.dp && g.ep == want.ep)
      return true;
  }
  return false;
}

TEST(Planner, ParameterCountsMatchTheModelCards) {
  EXPECT_NEAR(model_preset("llama2-70b").total_params() / 1e9, 69, 1.5);
  EXPECT_NEAR(model_preset("llama3-405b").total_params() / 1e9, 405, 6);
  EXPECT_NEAR(model_preset("gpt3-175b").total_params() / 1e9, 175, 2);
  ModelSpec ds = model_preset("deepseek-v3");
  EXPECT_NEAR(ds.total_params() / 1e9, 671, 5);
  EXPECT_NEAR(ds.active_params() / 1e9, 37, 2);
  // 685B with the MTP module, whose checkpoint stores its own copies of the
  // embedding and head (training shares them with the model).
  EXPECT_NEAR((ds.total_params() + ds.mtp_params() + 2.0 * ds.vocab * ds.hidden) / 1e9, 685, 1);
}

// The GPT base with GPT-2 XL's dims (Radford et al. 2019: 48 layers, h 1600,
// 25 heads, vocab 50257, 1024 positions): 1.56B parameters, 12 h^2 per
// layer, one tied vocab x h embedding and the 1024 x h position table
// (biases and LayerNorms, about 1M, are not counted); untied it would hold
// one more vocab x h matrix.
TEST(Planner, GptBaseCountsGpt2XlParameters) {
  ModelSpec m = gpt_base();
  m.layers = 48, m.hidden = 1600, m.heads = 25, m.ffn = 4 * m.hidden;
  EXPECT_NEAR(m.total_params() / 1e9, 1.5565, 0.001);
  EXPECT_FALSE(m.swiglu);
  EXPECT_EQ(m.kv(), m.heads);
  const double tied = m.total_params();
  m.tied_embeddings = false;
  EXPECT_DOUBLE_EQ(m.total_params() - tied, 50257.0 * 1600);
}

// Selective recompute holds the activations no recompute holds (flash
// attention keeps no s^2 term) and runs the attention core's forward again:
// one third of its forward and backward FLOPs; full runs every layer's
// forward again and holds far less. The gemms are the same under selective.
TEST(Planner, SelectiveRecomputeCostsTheAttentionCoreAgain) {
  const ModelSpec m = model_preset("llama2-70b");
  const ClusterSpec c = cluster_preset("H100", 64);
  const TrainSpec t{1024, 1};
  Config g;
  g.tp = 8, g.dp = 8, g.sp = true;
  const Estimate none = estimate(m, c, t, g);
  g.recompute = Recompute::selective;
  const Estimate selective = estimate(m, c, t, g);
  g.recompute = Recompute::full;
  const Estimate full = estimate(m, c, t, g);
  EXPECT_DOUBLE_EQ(selective.activations, none.activations);
  // The causal forward of the core: 2 s^2 (d + dv) per head, half of it,
  // over 8 TP ranks, 128 microbatches, at cuDNN's causal forward rate at
  // 4096 keys (time_model.cc's table).
  const double forward = m.heads / 8.0 * (m.dhead() + m.dv()) * m.layers * 128.0 * m.seq * m.seq;
  EXPECT_NEAR(selective.compute - none.compute, forward / (450e12), 1e-9 * none.compute);
  EXPECT_DOUBLE_EQ(selective.gemm, none.gemm);
  EXPECT_GT(full.compute, selective.compute);
  EXPECT_LT(full.activations, none.activations / 4);
  EXPECT_EQ(selective.config.to_string(), "tp8 cp1 pp1 dp8 sp recompute-selective");
}

TEST(Planner, ModelFlopsFollowMegatronsFormula) {
  ModelSpec m;
  m.layers = 2, m.hidden = 64, m.heads = 4, m.ffn = 256, m.vocab = 512, m.seq = 64;
  // T [6h (ffn F L) + 6 L (h (q + 2kv) + q h) + 6 h V] + 6 q L s^2 per sequence (causal).
  const double T = 3.0 * 64;
  const double want = T * (6.0 * 64 * (256 * 2 * 2) + 6.0 * 2 * (64 * (64 + 128) + 64 * 64) + 6.0 * 64 * 512) +
                      6.0 * 64 * 2 * 3 * 64 * 64;
  EXPECT_DOUBLE_EQ(model_flops_per_step(m, 3), want);
  // An MTP depth: one more layer, its [2h -> h] projection and the logits again.
  m.mtp_layers = 1;
  const double layer = T * 6.0 * (64 * 256 * 2 + 64 * (64 + 128) + 64 * 64) + 6.0 * 64 * 3 * 64 * 64;
  EXPECT_DOUBLE_EQ(model_flops_per_step(m, 3), want + layer + T * 6.0 * (2 * 64 * 64 + 64 * 512));
}

// Published and typical 6D configurations (Llama 3: Dubey et al. 2024,
// Table 4; DeepSeek-V3: DeepSeek-AI 2024): each must be valid and fit in memory.
TEST(Planner, Llama3_405bOn16384H100WithTp8Pp16Dp128) {
  ModelSpec m = model_preset("llama3-405b");
  ClusterSpec c = cluster_preset("H100", 16384);
  TrainSpec t{2048, 1};  // 16M tokens per step
  Config g = make(8, 1, 16, 128);
  g.recompute = Recompute::full;  // fits in 80 GB only with activation recomputation
  Estimate e = estimate(m, c, t, g);
  EXPECT_TRUE(e.fits) << e.memory / (1 << 30) << " GiB";
  EXPECT_GT(e.mfu, 0.15);
  EXPECT_LT(e.mfu, 0.75);
  g.recompute = Recompute::none;
  EXPECT_FALSE(estimate(m, c, t, g).fits) << "without recompute the activations do not fit";
  EXPECT_TRUE(search_finds(m, c, t, make(8, 1, 16, 128)));
}

TEST(Planner, DeepSeekV3On2048H800WithPp16Ep64FoldedIntoDp) {
  ModelSpec m = model_preset("deepseek-v3");
  ClusterSpec c = cluster_preset("H800", 2048);
  TrainSpec t{15360, 1};
  // DeepSeek-V3's report: PP16, EP64, no TP; Megatron folds EP into DP: dp = 128, edp = 2.
  Config g = make(1, 1, 16, 128, 64, 1);
  g.recompute = Recompute::full;
  Estimate e = estimate(m, c, t, g);
  EXPECT_TRUE(e.fits) << e.memory / (1 << 30) << " GiB";
  EXPECT_TRUE(search_finds(m, c, t, make(1, 1, 16, 128, 64, 1)));
}

TEST(Planner, Llama2_70bOn64A100WithTp8Dp8) {
  ModelSpec m = model_preset("llama2-70b");
  ClusterSpec c = cluster_preset("A100", 64);
  Config g = make(8, 1, 1, 8);
  g.recompute = Recompute::full;
  Estimate e = estimate(m, c, {1024, 1}, g);
  EXPECT_TRUE(e.fits) << e.memory / (1 << 30) << " GiB";
  EXPECT_TRUE(search_finds(m, c, {1024, 1}, make(8, 1, 1, 8)));
}

TEST(Planner, LongContext128kOn256H100WithTp8Pp4Cp4Dp2) {
  ModelSpec m = model_preset("llama2-70b-128k");
  ClusterSpec c = cluster_preset("H100", 256);
  Config g = make(8, 4, 4, 2);
  g.recompute = Recompute::full;
  Estimate e = estimate(m, c, {16, 1}, g);
  EXPECT_TRUE(e.fits) << e.memory / (1 << 30) << " GiB";
  g.cp = 1, g.dp = 8;  // the same GPUs and microbatches without CP: 4x the activations
  EXPECT_NEAR(estimate(m, c, {64, 1}, g).activations, 4 * e.activations, 1e-6 * e.activations);
}

TEST(Planner, MoreShardingMeansLessMemoryAndBubbleShrinksWithVpp) {
  ModelSpec m = model_preset("gpt3-175b");
  ClusterSpec c = cluster_preset("H100", 1024);
  TrainSpec t{1536, 1};
  Estimate a = estimate(m, c, t, make(4, 1, 8, 32)), b = estimate(m, c, t, make(8, 1, 8, 16));
  EXPECT_LT(b.weights, a.weights);
  Estimate v1 = estimate(m, c, t, make(8, 1, 8, 16, 1, 1, 1)), v2 = estimate(m, c, t, make(8, 1, 8, 16, 1, 1, 2));
  EXPECT_NEAR(v2.bubble, v1.bubble / 2, v1.bubble * 1e-9);
}

TEST(Planner, InvalidConfigsNameTheRule) {
  ModelSpec m = model_preset("llama2-70b");
  ClusterSpec c = cluster_preset("A100", 64);
  EXPECT_THROW(estimate(m, c, {1024, 1}, make(8, 1, 1, 4)), UsageError);     // 32 != 64 GPUs
  EXPECT_THROW(estimate(m, c, {1024, 1}, make(3, 1, 1, 21)), UsageError);    // heads % 3
  EXPECT_THROW(estimate(m, c, {1001, 1}, make(8, 1, 1, 8)), UsageError);     // batch % dp
  EXPECT_THROW(estimate(m, c, {1024, 1}, make(8, 1, 1, 8, 2)), UsageError);  // ep on a dense model
  EXPECT_THROW(model_preset("nope"), UsageError);
}

}  // namespace
}  // namespace sextant::plan
