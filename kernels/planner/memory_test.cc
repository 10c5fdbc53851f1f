#include "kernels/planner/memory.h"
#include "kernels/planner/planner.h"

#include <gtest/gtest.h>

namespace sextant::plan {
namespace {

// A GPT layer with MHA and a 4h GELU MLP (Korthikanti et al. 2022, eq. 2
// and section 4.2.2): per layer and microbatch s b h (10 + 24 / t) bytes
// under TP alone, 34 s b h / t under TP with SP, without the attention's
// 5 a s^2 b (flash attention keeps none).
TEST(PlannerMemory, MegatronActivationsAreKorthikantis) {
  ModelSpec m;
  m.layers = 8, m.hidden = 1024, m.heads = 16, m.ffn = 4096, m.vocab = 1, m.seq = 2048;
  const TrainSpec t{8, 1};  // 8 microbatches of one sequence at dp 1
  const double sbh = 2048.0 * 1024;
  for (int tp : {1, 2, 8})
    for (bool sp : {false, true}) {
      Config c;
      c.tp = tp, c.sp = sp;
      c.pp = 2;  // 4 layers a stage, min(pp, m) = 2 microbatches in flight
      const MemoryBreakdown b = estimate_memory(m, t, c, megatron_layout());
      const double logits = 2048.0 * 4 / tp;
      const double per_layer = sp ? 34.0 / tp : 10.0 + 24.0 / tp;
      EXPECT_NEAR(b.activations, 4 * 2 * sbh * per_layer + logits, 1.0) << "tp " << tp << " sp " << sp;
    }
}

// Weights 2 B, gradients 4 B, optimizer 12 B per parameter; the
// distributed optimizer shards the 12 B over dp x cp.
TEST(PlannerMemory, StateFollowsTheOptimizer) {
  ModelSpec m;
  m.layers = 2, m.hidden = 64, m.heads = 4, m.ffn = 256, m.vocab = 100, m.seq = 32;
  Config c;
  c.dp = 4;
  c.distributed_optimizer = false;
  const TrainSpec t{4, 1};
  const MemoryBreakdown whole = estimate_memory(m, t, c, megatron_layout());
  c.distributed_optimizer = true;
  const MemoryBreakdown sharded = estimate_memory(m, t, c, megatron_layout());
  const double params = held_params(m, c).dense;
  EXPECT_DOUBLE_EQ(whole.weights, 2 * params);
  EXPECT_DOUBLE_EQ(whole.gradients, 4 * params);
  EXPECT_DOUBLE_EQ(whole.optimizer, 12 * params);
  EXPECT_DOUBLE_EQ(sharded.optimizer, 12 * params / 4);
  EXPECT_DOUBLE_EQ(whole.communication, 0);  // Megatron's buckets are its main gradients
  // Gradients reduced in bf16 live in a bf16 buffer.
  EXPECT_DOUBLE_EQ(estimate_memory(m, t, c, megatron_layout(GradReduce::bf16)).gradients, 2 * params);
}

// The step's own layout: f32 weights (and a bf16 copy), f32 activations,
// buckets beside the gradients, a receive buffer per pipeline message.
TEST(PlannerMemory, SextantStepLayoutCountsItsBuffers) {
  EXPECT_EQ(sextant_step_layout(4, false).weight_bytes, 4);
  EXPECT_EQ(sextant_step_layout(2, false).weight_bytes, 6);
  ModelSpec m;
  m.layers = 4, m.hidden = 32, m.heads = 4, m.ffn = 128, m.vocab = 50, m.seq = 16;
  Config c;
  c.pp = 2, c.distributed_optimizer = false;
  const TrainSpec t{4, 1};  // 4 microbatches
  const MemoryBreakdown b = estimate_memory(m, t, c, sextant_step_layout(4, false));
  const double params = held_params(m, c).dense;
  EXPECT_DOUBLE_EQ(b.communication, 4 * params + 4.0 * 4 * 16 * 32);  // buckets + 4 receive buffers [s, h]
  c.vpp = 2;  // the first stage receives into 3 chunks' buffers a microbatch
  EXPECT_DOUBLE_EQ(estimate_memory(m, t, c, sextant_step_layout(4, false)).communication,
                   4 * params + 3 * 4.0 * 4 * 16 * 32);
  // The backward's working set: the logits' gradient and one layer's gradients.
  EXPECT_GT(b.workspace, 4.0 * 16 * 50);
  EXPECT_EQ(estimate_memory(m, t, c, megatron_layout()).workspace, 0);
}

// One MoE layer (h 8, 16 tokens, top-2 of 4 experts) and its dispatch
// buffers for one microbatch under config c, in rows of h: the
// communication bytes less the gradient buckets.
double dispatch_buffer_rows(const Config& c, bool peer_memory, double expert_load = 1) {
  ModelSpec m;
  m.layers = 1, m.moe_layers = 1, m.hidden = 8, m.heads = 2, m.ffn = 16, m.vocab = 10, m.seq = 16;
  m.experts = 4, m.topk = 2, m.moe_ffn = 8;
  StageLoad stage;
  stage.expert_load = expert_load;
  const MemoryBreakdown b = estimate_memory(m, TrainSpec{c.dp, 1}, c, sextant_step_layout(4, peer_memory), stage);
  const HeldParams p = held_params(m, c);
  return (b.communication - 4 * (p.dense + p.expert)) / (4.0 * 8);
}

// R = 16 x 2 routed rows and T = 16 tokens: 4 x 1.25 R + 2 T over peer
// memory, 6 R + 2 T over the collectives, and with ETP 2 (no EP) the
// permuted rows and four buffers of the group's 2 R rows a pass.
TEST(PlannerMemory, SextantDispatchBuffersFollowTheTransport) {
  Config c;
  c.distributed_optimizer = false;
  const double r = 32, tokens = 16;
  c.ep = 2, c.dp = 2;
  EXPECT_DOUBLE_EQ(dispatch_buffer_rows(c, true), 5 * r + 2 * tokens);
  EXPECT_DOUBLE_EQ(dispatch_buffer_rows(c, false), 6 * r + 2 * tokens);
  c.ep = 1, c.dp = 1, c.tp = 2, c.etp = 2, c.sp = true;  // SP: each TP rank routes half the tokens
  EXPECT_DOUBLE_EQ(dispatch_buffer_rows(c, true),
                   2 * (r / 2 + 4 * 2 * r / 2 + tokens / 2));  // no peer memory under ETP
}

// Uneven routing grows the buffers of received rows alone: the windows
// sized by the most any EP rank receives, the expert inputs and the ETP
// group's buffers; the rows a rank sends and gets back stay R.
TEST(PlannerMemory, DispatchBuffersOfReceivedRowsGrowWithTheExpertLoad) {
  Config c;
  c.distributed_optimizer = false;
  const double r = 32, tokens = 16;
  c.ep = 2, c.dp = 2;
  EXPECT_DOUBLE_EQ(dispatch_buffer_rows(c, true, 1.5), 5 * 1.5 * r + 2 * tokens);
  EXPECT_DOUBLE_EQ(dispatch_buffer_rows(c, false, 1.5), 2 * (2 * r + 1.5 * r + tokens));
  // The busiest rank receives at least its share.
  EXPECT_DOUBLE_EQ(dispatch_buffer_rows(c, false, 0.5), dispatch_buffer_rows(c, false, 1.0));
  c.ep = 2, c.dp = 1, c.tp = 2, c.etp = 2, c.sp = true;
  EXPECT_DOUBLE_EQ(dispatch_buffer_rows(c, false, 2.0), 2 * (r / 2 + r / 2 + r + 4 * 2 * r + tokens / 2));
}

// The last stage holds the MTP depths: at one stage they add a layer (MoE
// for DeepSeek-V3) and the projection; over 16 stages the first stage's 4
// layers still outweigh the last's 1 + 1.
TEST(PlannerMemory, TheLastStageHoldsTheMtpDepths) {
  ModelSpec m = model_preset("deepseek-v3");
  Config g;
  g.ep = 8, g.dp = 8;
  const HeldParams one = held_params(m, g);
  EXPECT_EQ(one.layers, 62);
  EXPECT_EQ(one.moe_layers, 59);
  m.mtp_layers = 0;
  const HeldParams without = held_params(m, g);
  EXPECT_NEAR(one.dense + one.expert - without.dense - without.expert,
              m.attention_params() + m.shared_experts * m.mlp_params(m.moe_ffn) + 2.0 * m.hidden * m.hidden +
                  m.experts / 8.0 * m.mlp_params(m.moe_ffn) + m.hidden * m.experts,
              1);
  m.mtp_layers = 1;
  g.pp = 16;
  EXPECT_EQ(held_params(m, g).layers, 4);
}

}  // namespace
}  // namespace sextant::plan
