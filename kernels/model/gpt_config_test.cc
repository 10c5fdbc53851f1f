// The model's bad-input rules: each rejects with one line naming the rule.
#include "kernels/model/gpt_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness/error.h"

namespace sextant::model {
namespace {

GptConfig tiny() {
  return gpt_config_from_json({{"vocab", 64},
                               {"hidden", 16},
                               {"heads", 4},
                               {"layers", 4},
                               {"seq", 16},
                               {"batch", 8},
                               {"moe_every", 2},
                               {"experts", 4},
                               {"topk", 2}});
}

std::string rule(const GptConfig& c, const ParallelConfig& p) {
  try {
    validate(c, p);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(GptConfig, MoePatternFollowsMegatronsLayerFrequency) {
  EXPECT_EQ(moe_layer_pattern(4, 2, ""), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(moe_layer_pattern(3, 0, ""), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(moe_layer_pattern(4, 0, "0110"), (std::vector<bool>{false, true, true, false}));
  EXPECT_THROW(moe_layer_pattern(6, 0, "0101"), UsageError);
  EXPECT_THROW(moe_layer_pattern(4, 0, "01x1"), UsageError);
  EXPECT_THROW(moe_layer_pattern(4, 5, ""), UsageError);
}

TEST(GptConfig, DefaultsFromJson) {
  const GptConfig c = tiny();
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.ffn, 64);
  EXPECT_EQ(c.moe_ffn, 64);
  EXPECT_EQ(c.moe_layer_count(), 2);
  EXPECT_EQ(rule(c, ParallelConfig{}), "");
}

TEST(GptConfig, EachRuleNamesItsNumbers) {
  GptConfig c = tiny();
  EXPECT_EQ(rule(c, {3, 1, 1, 1}), "--tp 3 must divide --heads 4");
  EXPECT_NE(rule(c, {2, 1, 1, 1}).find("MoE layers with --tp 2 need --sp"), std::string::npos);
  EXPECT_EQ(rule(c, {1, 1, 1, 1, 3}), "--ep 3 must divide --experts 4");
  EXPECT_NE(rule(c, {1, 1, 3, 1}).find("--pp 3 x --vpp 1 = 3 must divide --layers 4"), std::string::npos);
  EXPECT_NE(rule(c, {1, 3, 1, 1}).find("2 x --cp 3 = 6 must divide --seq 16"), std::string::npos);
  EXPECT_NE(rule(c, {1, 1, 1, 3}).find("--dp 3 x --microbatches 1 = 3 must divide --batch 8"), std::string::npos);
  ParallelConfig sp{4, 4, 1, 1};
  sp.sp = true;
  c.seq = 24;
  EXPECT_NE(rule(c, sp).find("--tp 4 must divide seq/cp = 24/4 = 6"), std::string::npos) << rule(c, sp);
  c.seq = 16;
  c.cp_comm = cp::Variant::a2a;
  EXPECT_NE(rule(c, {1, 8, 1, 1}).find("--cp 8 must divide heads/tp = 4/1 = 4"), std::string::npos);
  c.kv_heads = 1;  // GQA 4:1 on a Ulysses group of 4: the KV head is replicated
  EXPECT_EQ(rule(c, {1, 4, 1, 1}), "");
  c.heads = 12, c.kv_heads = 6, c.hidden = 12 * c.head_dim;
  EXPECT_NE(rule(c, {1, 4, 1, 1}).find("--cp 4 and kv_heads/tp = 6/1 = 6 must divide one another"), std::string::npos)
      << rule(c, {1, 4, 1, 1});
  c = tiny();
  c.kv_heads = 3;
  EXPECT_NE(rule(c, {1, 1, 1, 1}).find("--kv-heads 3 must divide --heads"), std::string::npos);
  c.kv_heads = 1;  // GQA 4:1: TP splits whole KV groups
  EXPECT_EQ(rule(c, {2, 1, 1, 1, 1}), "--tp 2 must divide --kv-heads 1");
  c = tiny();
  c.schedule = pp::ScheduleId::zb_v;
  EXPECT_NE(rule(c, {1, 1, 2, 1}).find("--vpp 1 must be 2 for schedule zb-v"), std::string::npos);
}

}  // namespace
}  // namespace sextant::model
