#include "kernels/planner/time_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/planner/planner.h"

namespace sextant::plan {
namespace {

Config tp_dp(int tp, int dp) {
  Config c;
  c.tp = tp, c.dp = dp, c.sp = tp > 1;
  return c;
}

// A gemm of one tile more than the SMs hold runs a second, nearly empty
// wave: it takes as long as two full waves.
TEST(TimeModel, GemmsRunInWavesOfTheSms) {
  ClusterSpec c = cluster_preset("H100", 8);
  c.gemm_latency_us = 0;
  const double full = gemm_seconds(c, c.peak_tflops, 128.0 * 132, 256, 4096);      // 132 tiles
  const double one_more = gemm_seconds(c, c.peak_tflops, 128.0 * 133, 256, 4096);  // 133 tiles: 2 waves
  EXPECT_NEAR(one_more / full, 2.0, 1e-9);
  EXPECT_NEAR(full, 2.0 * 128 * 132 * 256 * 4096 / (989e12 * c.gemm_efficiency), 1e-15);
  c.sms = 0;  // no waves: FLOPs alone
  EXPECT_NEAR(gemm_seconds(c, c.peak_tflops, 128.0 * 133, 256, 4096) / full, 133.0 / 132, 1e-9);
}

// The attention core runs at its kernel's measured rate: a causal step at
// 4096 keys spends 450 of 989 TFLOP/s forward and 413 backward, at 16384
// keys 621 and 511; between them the rate follows log(seq). A CP rank's
// kernels see seq / cp keys, and only the diagonal step's 1 / cp of the
// FLOPs is masked: the rest runs at the unmasked rates (567 and 534 at 4096).
TEST(TimeModel, ShortAttentionKernelsRunSlower) {
  ModelSpec m = model_preset("llama2-70b");
  const ClusterSpec c = cluster_preset("H100", 64);
  const TrainSpec t{1024, 1};
  const Config g = tp_dp(8, 8);
  // Seconds per FLOP of the core's forward and backward (3.5 x the forward's FLOPs).
  auto per_flop = [&](const ModelSpec& model, const Config& config) {
    const double microbatches = 1024.0 / config.dp;
    const double forward = model.heads / 8.0 * (model.dhead() + model.dv()) * model.layers * microbatches * model.seq *
                           model.seq / config.cp;
    return step_time(model, c, t, config).attention / (3.5 * forward);
  };
  m.seq = 4096;
  const double at_4k = per_flop(m, g);
  EXPECT_NEAR(at_4k, (1 / 450e12 + 2.5 / 413e12) / 3.5, 1e-3 * at_4k);
  m.seq = 16384;
  const double at_16k = per_flop(m, g);
  EXPECT_NEAR(at_16k, (1 / 621e12 + 2.5 / 511e12) / 3.5, 1e-3 * at_16k);
  m.seq = 2048;  // below the shortest measured length: its rate
  EXPECT_NEAR(per_flop(m, g), at_4k, 1e-9 * at_4k);
  m.seq = 8192;
  const double at_8k = per_flop(m, g);
  EXPECT_NEAR(at_8k, (1 / 533e12 + 2.5 / 524e12) / 3.5, 1e-3 * at_8k);
  m.seq = 5792;  // 4096 x sqrt(2): halfway in log(seq), so each rate is the two lengths' mean
  const double between = per_flop(m, g);
  EXPECT_NEAR(between, (1 / 491.5e12 + 2.5 / 468.5e12) / 3.5, 1e-3 * between);
  m.seq = 8192;
  Config cp = tp_dp(8, 4);
  cp.cp = 2;  // 4096 keys per kernel, half the FLOPs masked
  EXPECT_NEAR(per_flop(m, cp), (0.5 / 450e12 + 0.5 / 567e12 + 2.5 * (0.5 / 413e12 + 0.5 / 534e12)) / 3.5, 1e-3 * at_4k);
  m.seq = 16384;
  cp = tp_dp(8, 2);
  cp.cp = 4;  // 4096 keys per kernel, a quarter masked
  EXPECT_NEAR(per_flop(m, cp), (0.25 / 450e12 + 0.75 / 567e12 + 2.5 * (0.25 / 413e12 + 0.75 / 534e12)) / 3.5,
              1e-3 * at_4k);
}

// Each overlap fraction hides its own mechanism's communication and nothing else.
TEST(TimeModel, EachOverlapHidesItsOwnCommunication) {
  const ModelSpec m = model_preset("llama2-70b");
  const ClusterSpec c = cluster_preset("H100", 64);
  TrainSpec t{1024, 1};
  const Config g = tp_dp(8, 8);
  const StepTime exposed = step_time(m, c, t, g);
  t.overlap.tp = 1;
  const StepTime hidden = step_time(m, c, t, g);
  EXPECT_GT(exposed.tp, 0);
  EXPECT_LT(hidden.tp, exposed.tp / 10);  // NVLink all-gathers hide behind the layer's gemms
  EXPECT_DOUBLE_EQ(hidden.gemm, exposed.gemm);
  EXPECT_DOUBLE_EQ(hidden.dp, exposed.dp);
  t.overlap = {};
  t.overlap.dp = 0;
  EXPECT_GT(step_time(m, c, t, g).dp, exposed.dp);
}

// DeepSeek-V3's EP all-to-all over the network: exposed it costs a large
// share of the step; DualPipe's overlap hides most of it.
TEST(TimeModel, ExpertAllToAllHidesBehindComputeWithDualPipe) {
  const ModelSpec m = model_preset("deepseek-v3");
  const ClusterSpec c = cluster_preset("H800", 2048);
  TrainSpec t{15360, 1};
  Config g;
  g.pp = 16, g.dp = 128, g.ep = 64;
  const StepTime plain = step_time(m, c, t, g);
  t.overlap.ep = 1;
  const StepTime dual = step_time(m, c, t, g);
  EXPECT_GT(plain.ep, 0.2 * plain.step());
  EXPECT_LT(dual.ep, plain.ep / 2);
}

// FP8 linears run at the FP8 peak (times the measured FP8/bf16 efficiency
// ratio) and add their casts to the memory-bound time; attention stays bf16.
TEST(TimeModel, Fp8HalvesTheGemmsAndAddsCasts) {
  const ModelSpec m = model_preset("llama2-70b");
  const ClusterSpec c = cluster_preset("H100", 64);
  TrainSpec t{1024, 1};
  const StepTime bf16 = step_time(m, c, t, tp_dp(8, 8));
  t.precision = Precision::fp8;
  const StepTime fp8 = step_time(m, c, t, tp_dp(8, 8));
  EXPECT_LT(fp8.gemm, 0.65 * bf16.gemm);
  EXPECT_GT(fp8.gemm, 0.5 * bf16.gemm);
  EXPECT_GT(fp8.memory_bound, bf16.memory_bound);
  EXPECT_DOUBLE_EQ(fp8.attention, bf16.attention);
}

// Norms, activations and Adam are costed from the memory bandwidth.
TEST(TimeModel, MemoryBoundKernelsScaleWithBandwidth) {
  const ModelSpec m = model_preset("llama2-70b");
  ClusterSpec c = cluster_preset("H100", 64);
  const TrainSpec t{1024, 1};
  const StepTime fast = step_time(m, c, t, tp_dp(8, 8));
  c.hbm_GBps /= 2;
  const StepTime slow = step_time(m, c, t, tp_dp(8, 8));
  EXPECT_GT(fast.memory_bound, 0);
  EXPECT_NEAR(slow.memory_bound, 2 * fast.memory_bound, 1e-9 * fast.memory_bound);
  EXPECT_NEAR(slow.optimizer, 2 * fast.optimizer, 1e-9 * fast.optimizer);
  EXPECT_DOUBLE_EQ(slow.gemm, fast.gemm);
}

// The per-layer overhead is paid per layer and microbatch of the heaviest stage.
TEST(TimeModel, LayerOverheadPerLayerAndMicrobatch) {
  const ModelSpec m = model_preset("llama2-70b");
  ClusterSpec c = cluster_preset("H100", 64);
  c.layer_overhead_us = 100;
  const StepTime s = step_time(m, c, {1024, 1}, tp_dp(8, 8));
  EXPECT_NEAR(s.overhead, 80 * 128 * 100e-6, 1e-9);
}

// A DP ring across nodes moves its bytes over the NICs of all its ranks on a
// node at once: 8 ranks per node reduce 8 times faster than 1.
TEST(TimeModel, DataParallelRingsUseEveryNicOfTheirRanksOnANode) {
  const ModelSpec m = model_preset("llama2-70b");
  ClusterSpec c = cluster_preset("H100", 16);
  c.latency_us = 0;
  TrainSpec t{1024, 1};
  t.overlap.dp = 0;
  const StepTime eight_per_node = step_time(m, c, t, tp_dp(1, 16));
  c.gpus_per_node = 1;
  const StepTime one_per_node = step_time(m, c, t, tp_dp(1, 16));
  EXPECT_NEAR(one_per_node.dp / eight_per_node.dp, 8.0, 1e-9);  // min(NVLink, 8 NICs) over one NIC
  c.gpus_per_node = 16;                                         // one node: NVLink
  EXPECT_NEAR(step_time(m, c, t, tp_dp(1, 16)).dp / eight_per_node.dp, 8 * c.network_GBps / c.nvlink_GBps, 1e-9);
}

// Unfused attention writes and reads the [s, s] scores: its time depends on
// the memory bandwidth; fused attention's does not.
TEST(TimeModel, UnfusedAttentionMovesTheScoresThroughMemory) {
  const ModelSpec m = model_preset("llama2-70b");
  ClusterSpec c = cluster_preset("H100", 64);
  TrainSpec t{1024, 1};
  const StepTime fused = step_time(m, c, t, tp_dp(8, 8));
  t.attention = AttentionKernel::unfused;
  const StepTime unfused = step_time(m, c, t, tp_dp(8, 8));
  EXPECT_GT(unfused.attention, fused.attention);
  c.hbm_GBps = INFINITY;
  const double gemms_only = step_time(m, c, t, tp_dp(8, 8)).attention;
  c.hbm_GBps = cluster_preset("H100", 64).hbm_GBps / 2;
  EXPECT_NEAR(step_time(m, c, t, tp_dp(8, 8)).attention - gemms_only, 2 * (unfused.attention - gemms_only),
              1e-9 * unfused.attention);
  t.attention = AttentionKernel::fused;
  EXPECT_DOUBLE_EQ(step_time(m, c, t, tp_dp(8, 8)).attention, fused.attention);
}

// Megatron's unfused cross-entropy moves 52 bytes per logit where a fused
// kernel moves 16: the difference is the head's logits times 36 bytes, per
// microbatch, at the memory bandwidth.
TEST(TimeModel, UnfusedCrossEntropyMovesTheLogitsMoreOften) {
  const ModelSpec m = model_preset("llama2-70b");
  const ClusterSpec c = cluster_preset("H100", 64);
  TrainSpec t{1024, 1};
  const StepTime fused = step_time(m, c, t, tp_dp(8, 8));
  t.cross_entropy = CrossEntropy::unfused;
  const StepTime unfused = step_time(m, c, t, tp_dp(8, 8));
  const double microbatches = 1024 / 8, logits = 4096.0 * 32000 / 8;
  EXPECT_NEAR(unfused.memory_bound - fused.memory_bound, microbatches * logits * 36 / (c.hbm_GBps * 1e9),
              1e-9 * fused.memory_bound);
  EXPECT_DOUBLE_EQ(unfused.gemm, fused.gemm);
}

// A squared ReLU has GELU's matrices and FLOPs, and two passes more over
// the activation forward (relu's output written, then read by the square),
// which the backward triples as it does every forward byte.
TEST(TimeModel, SquaredReluAddsTwoPassesOverTheActivation) {
  ModelSpec m = model_preset("gpt3-175b");
  const ClusterSpec c = cluster_preset("H100", 64);
  const TrainSpec t{1024, 1};
  const StepTime gelu = step_time(m, c, t, tp_dp(8, 8));
  m.squared_relu = true;
  const StepTime squared = step_time(m, c, t, tp_dp(8, 8));
  const double microbatches = 1024 / 8, elements = static_cast<double>(m.seq) * m.ffn / 8;
  EXPECT_NEAR(squared.memory_bound - gelu.memory_bound, microbatches * m.layers * 3 * elements * 4 / (c.hbm_GBps * 1e9),
              1e-9 * gelu.memory_bound);
  EXPECT_DOUBLE_EQ(squared.gemm, gelu.gemm);
  EXPECT_DOUBLE_EQ(model_flops_per_step(m, 1024), model_flops_per_step(model_preset("gpt3-175b"), 1024));
}

// The DP exchange moves the gradients in their wire type: with the
// distributed optimizer f32 gradients and bf16 parameters are 6 bytes per
// parameter against 4 in bf16; an all-reduce moves the gradients twice.
TEST(TimeModel, GradientsReducedInF32MoveMoreBytes) {
  const ModelSpec m = model_preset("llama2-70b");
  ClusterSpec c = cluster_preset("H100", 64);
  c.latency_us = 0;  // bytes alone
  TrainSpec t{1024, 1};
  t.overlap.dp = 0;
  Config g = tp_dp(8, 8);
  const double f32 = step_time(m, c, t, g).dp;
  t.grad_reduce = GradReduce::bf16;
  const double bf16 = step_time(m, c, t, g).dp;
  EXPECT_NEAR(f32 / bf16, 6.0 / 4, 1e-9);
  g.distributed_optimizer = false;
  EXPECT_NEAR(step_time(m, c, t, g).dp / bf16, 1.0, 1e-9);  // 2 + 2 bytes either way
  t.grad_reduce = GradReduce::f32;
  EXPECT_NEAR(step_time(m, c, t, g).dp / bf16, 2.0, 1e-9);
}

// In a MoE model the passes run over every MLP: the dense layers', each
// routed row's experts and the shared expert's.
TEST(TimeModel, SquaredReluAddsItsPassesToTheExpertsToo) {
  ModelSpec m = model_preset("deepseek-v3");
  const ClusterSpec c = cluster_preset("H800", 64);
  const TrainSpec t{1024, 1};
  Config g = tp_dp(1, 64);
  g.ep = 8;
  const StepTime fused = step_time(m, c, t, g);
  m.squared_relu = true;
  const StepTime squared = step_time(m, c, t, g);
  const double tokens = static_cast<double>(m.seq), microbatches = 1024 / 64;
  const double dense = tokens * m.ffn, experts = tokens * m.topk * m.moe_ffn + tokens * m.shared_experts * m.moe_ffn;
  const double elements = m.trained_dense_layers() * dense + m.trained_moe_layers() * experts;  // with the MTP depth
  EXPECT_NEAR(squared.memory_bound - fused.memory_bound, microbatches * 3 * elements * 4 / (c.hbm_GBps * 1e9),
              1e-9 * fused.memory_bound);
  EXPECT_DOUBLE_EQ(squared.gemm, fused.gemm);
}

// Megatron's TP linears under SP block on 6 of their 10 all-gathers and
// reduce-scatters per layer (4 forward, the row-parallel output gradient's
// 2 backward); the column-parallel backward's 4 hide behind its own gemms.
// Without SP the forward's 2 all-reduces block and the backward's 2 hide.
TEST(TimeModel, TensorParallelBackwardCollectivesHideBehindTheirGemms) {
  const ModelSpec m = model_preset("llama2-70b");
  ClusterSpec c = cluster_preset("H100", 64);
  c.latency_us = 0;
  const TrainSpec t{1024, 1};
  Config g = tp_dp(8, 8);
  const double unit = m.seq * m.hidden * 2.0 * 7 / 8 / (c.nvlink_GBps * 1e9);  // one all-gather of [s, h]
  const double layers_x_microbatches = 80.0 * 1024 / 8;
  EXPECT_NEAR(step_time(m, c, t, g).tp, layers_x_microbatches * 6 * unit, 1e-9);
  g.sp = false;
  EXPECT_NEAR(step_time(m, c, t, g).tp, layers_x_microbatches * 4 * unit, 1e-9);
  c.nvlink_GBps /= 1000;  // too slow for any gemm to hide: all 10 units count, 6 blocking and 4 exposed beyond cover
  g.sp = true;
  const double slow_unit = 1000 * unit;
  EXPECT_GT(step_time(m, c, t, g).tp, layers_x_microbatches * 9 * slow_unit);
  EXPECT_LT(step_time(m, c, t, g).tp, layers_x_microbatches * 10 * slow_unit);
}

// Megatron splits an MoE layer's shared experts over TP even without
// expert TP: DeepSeek-V3's MoE layers then run the MLP block's collectives
// as a dense layer does (6 units each under SP), not the attention's alone.
TEST(TimeModel, SharedExpertsRunTheTensorParallelCollectivesOfAnMlp) {
  ModelSpec m = model_preset("deepseek-v3");
  ClusterSpec c = cluster_preset("H100", 64);
  c.latency_us = 0;
  const TrainSpec t{1024, 1};
  Config g = tp_dp(2, 32);
  g.ep = 8;
  const double shared = step_time(m, c, t, g).tp;
  m.shared_experts = 0;
  // 3 dense layers and 59 MoE ones (the MTP depth's among them).
  EXPECT_NEAR(shared / step_time(m, c, t, g).tp, 62.0 * 6 / (3 * 6 + 59 * 3), 1e-9);
}

// Full recompute runs each forward's communication again: the CP ring's
// one of three K/V passes (4/3), TP's 4 forward units beside its 6
// blocking ones, and the MoE dispatch and combine (3/2).
TEST(TimeModel, FullRecomputeRepeatsTheForwardsCommunication) {
  const ModelSpec m = model_preset("llama2-70b");
  const ClusterSpec c = cluster_preset("H100", 64);
  TrainSpec t{1024, 1};
  t.overlap.cp = 0;
  Config g = tp_dp(8, 4);
  g.cp = 2;
  const StepTime none = step_time(m, c, t, g);
  g.recompute = Recompute::full;
  const StepTime full = step_time(m, c, t, g);
  EXPECT_NEAR(full.cp / none.cp, 4.0 / 3, 1e-9);
  EXPECT_NEAR(full.tp / none.tp, 10.0 / 6, 1e-9);

  const ModelSpec moe = model_preset("deepseek-v3");
  Config e = tp_dp(1, 64);
  e.ep = 8;
  const double ep_none = step_time(moe, c, t, e).ep;
  e.recompute = Recompute::full;
  EXPECT_NEAR(step_time(moe, c, t, e).ep / ep_none, 1.5, 1e-9);
}

// The pipeline sends an activation and a gradient per model chunk on the
// critical path: 2 (microbatches x vpp + pp - 1) messages across nodes.
// Under the interleaved schedule Overlap::pp hides them behind the next
// chunk's forward; the 1F1B schedule cannot overlap them.
TEST(TimeModel, PipelineMessagesPerChunkHideOnlyWhenInterleaved) {
  const ModelSpec m = model_preset("llama2-70b");
  ClusterSpec c = cluster_preset("H100", 64);
  c.latency_us = 0;
  TrainSpec t{1024, 1};
  Config g = tp_dp(8, 2);
  g.pp = 4;
  const double message = m.seq / 8.0 * m.hidden * 2 / (c.network_GBps * 1e9), microbatches = 512;
  EXPECT_NEAR(step_time(m, c, t, g).pp, 2 * (microbatches + 3) * message, 1e-9);
  g.vpp = 2;
  EXPECT_NEAR(step_time(m, c, t, g).pp, 0, 1e-12);  // an 8 MiB message hides behind 10 layers' forward
  t.overlap.pp = 0;
  EXPECT_NEAR(step_time(m, c, t, g).pp, 2 * (2 * microbatches + 3) * message, 1e-9);
  g.vpp = 1;
  t.overlap.pp = 1;
  EXPECT_NEAR(step_time(m, c, t, g).pp, 2 * (microbatches + 3) * message, 1e-9);
  g.dp = 1, g.tp = 2;  // the whole pipeline on one node: NVLink
  EXPECT_NEAR(step_time(m, c, t, g).pp, 2 * (1024 + 3) * message * 4 * c.network_GBps / c.nvlink_GBps, 1e-9);
}

// Interleaved, each model chunk's gradients are reduced whole after its
// last backward: the last chunk's share (1/vpp) stays exposed however fast
// the network, where 1F1B hides its buckets behind the last backward. On a
// network far too slow to hide anything, what remains is every chunk's
// reduce-scatter queued, plus chunk 0's share of the next all-gather.
TEST(TimeModel, InterleavedChunksReduceTheirGradientsWholeAfterTheirLastBackward) {
  const ModelSpec m = model_preset("llama2-70b");
  ClusterSpec c = cluster_preset("H100", 64);
  TrainSpec t{1024, 1};
  Config g = tp_dp(4, 4);
  g.pp = 4, g.vpp = 2;
  t.overlap.dp = 0;
  const double reduce = step_time(m, c, t, g).dp;  // f32 reduce-scatter (4 bytes) + bf16 all-gather (2)
  const double sync = reduce * 4 / 6;
  t.overlap.dp = 1;
  const double interleaved = step_time(m, c, t, g).dp;
  EXPECT_LT(interleaved, reduce);
  g.vpp = 1;
  EXPECT_LT(step_time(m, c, t, g).dp, sync / 2);  // 1F1B hides more than the last chunk's half
  EXPECT_LT(step_time(m, c, t, g).dp, interleaved);

  c.network_GBps /= 1000;
  g.vpp = 2;
  t.overlap.dp = 0;
  const double slow = step_time(m, c, t, g).dp;
  t.overlap.dp = 1;
  EXPECT_NEAR(step_time(m, c, t, g).dp / slow, (4 + 2.0 / 2) / 6, 0.01);
}

// An MTP depth is one more layer of the last stage, its [2h -> h]
// projection and the LM head again: the step costs what a model of one more
// layer does, plus a head and the projection.
TEST(TimeModel, MultiTokenPredictionAddsALayerAndAHeadToTheLastStage) {
  const ModelSpec m = model_preset("llama2-70b");
  const ClusterSpec c = cluster_preset("H100", 64);
  const TrainSpec t{1024, 1};
  const Config g = tp_dp(8, 8);
  ModelSpec deeper = m, mtp = m;
  deeper.layers += 1, mtp.mtp_layers = 1;
  const double base = step_time(m, c, t, g).gemm, one_more = step_time(deeper, c, t, g).gemm;
  const double head = base - m.layers * (one_more - base);
  // The projection [4096, 16384] x [16384, 1024] (TP 8), forward and both
  // gradients, over 128 microbatches.
  const double projection =
      128 * (gemm_seconds(c, c.peak_tflops, 4096, 1024, 16384) + gemm_seconds(c, c.peak_tflops, 4096, 16384, 1024) +
             gemm_seconds(c, c.peak_tflops, 16384, 1024, 4096));
  EXPECT_NEAR(step_time(mtp, c, t, g).gemm, one_more + head + projection, 1e-9 * base);
  // Over 8 stages the last holds 10 layers and the MTP depth with its two
  // heads, more than the first's 10: it sets the step (1024 microbatches).
  Config staged = g;
  staged.pp = 8, staged.dp = 1;
  EXPECT_NEAR(step_time(mtp, c, t, staged).gemm - step_time(m, c, t, staged).gemm,
              1024.0 / 128 * (one_more - base + head + projection), 1e-9 * base);
}

}  // namespace
}  // namespace sextant::plan
