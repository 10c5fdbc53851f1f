// The parameter table: shards of every rank cover each global tensor, and a
// rank's block holds exactly the global tensor's values there.
#include "kernels/model/gpt_params.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kernels/model/data.h"

namespace sextant::model {
namespace {

GptConfig tiny() {
  return gpt_config_from_json({{"vocab", 32},
                               {"hidden", 8},
                               {"heads", 2},
                               {"layers", 2},
                               {"seq", 8},
                               {"batch", 4},
                               {"moe_every", 2},
                               {"experts", 4},
                               {"topk", 2},
                               {"microbatches", 2}});
}

TEST(GptParams, BlocksOfEveryRankCoverEachTensor) {
  const GptConfig c = tiny();
  ParallelConfig p{2, 1, 1, 2, 2};  // tp2 dp2 ep2 (etp 2, edp 1)
  p.sp = true;
  const RankGrid grid(p, p.world());
  const std::vector<ParamSpec> specs = param_specs(c);
  for (int i = 0; i < static_cast<int>(specs.size()); ++i) {
    std::vector<int> covered(static_cast<size_t>(numel_of(specs[i].shape)), 0);
    for (int r = 0; r < p.world(); ++r)
      for (const ParamBlock& b : blocks_of(specs, i, p, grid.coords(r))) {
        Tensor block = init_block(specs[i], 7, b.offset, b.local, DType::f32);
        const Tensor whole = init_global(specs[i], 7, DType::f32);
        // Walk the block's elements: flat index in the block -> global flat index.
        for (int64_t e = 0; e < block.numel(); ++e) {
          int64_t rest = e, global = 0, stride = 1;
          std::vector<int64_t> idx(b.local.size());
          for (int d = static_cast<int>(b.local.size()) - 1; d >= 0; --d)
            idx[d] = rest % b.local[d], rest /= b.local[d];
          for (int d = static_cast<int>(b.local.size()) - 1; d >= 0; --d) {
            global += (idx[d] + b.offset[d]) * stride;
            stride *= specs[i].shape[d];
          }
          ASSERT_EQ(block.at(e), whole.at(global)) << specs[i].name;
          covered[static_cast<size_t>(global)] += 1;
        }
      }
    for (int n : covered) ASSERT_GT(n, 0) << specs[i].name << " has an element no rank holds";
  }
}

TEST(GptData, EveryTokenIsHeldByExactlyOneRankOutsideTheTpRegion) {
  GptConfig c = tiny();
  ParallelConfig p{2, 2, 1, 2};  // tp2 sp cp2 dp2, zigzag
  p.sp = true;
  const RankGrid grid(p, p.world());
  std::vector<int> seen(static_cast<size_t>(c.batch * c.seq), 0);
  for (int r = 0; r < p.world(); ++r)
    for (int mb = 0; mb < c.microbatches; ++mb) {
      MicrobatchData d = microbatch_data(c, p, grid.coords(r), TokenSource(3), 0, mb);
      ASSERT_EQ(d.ids.size(), static_cast<size_t>(d.batch * d.rows));
      for (int64_t t : d.token_index) seen[static_cast<size_t>(t)] += 1;
    }
  for (int n : seen) EXPECT_EQ(n, 1);
  // Inputs and targets are the global batch shifted by one.
  const std::vector<int64_t> all = global_tokens(c, TokenSource(3), 0);
  MicrobatchData d = microbatch_data(c, p, grid.coords(0), TokenSource(3), 0, 0);
  EXPECT_EQ(d.ids[0], all[0]);
  EXPECT_EQ(d.targets[0], all[1]);
}

// Packed rows (8 = 4 + 4, zigzag per sequence at cp 2): every position is
// held once, each rank's inputs and targets are the global batch's at its
// positions, and a sequence's last target is its own next token, not the
// next sequence's first input.
TEST(GptData, PackedRowsGiveEverySequenceItsOwnTargets) {
  GptConfig c = tiny();
  c.seq_lens = {4, 4};
  ParallelConfig p{1, 2, 1, 2};  // cp2 dp2
  const RankGrid grid(p, p.world());
  const GlobalBatch all = global_batch(c, TokenSource(3), 0);
  std::vector<int> seen(static_cast<size_t>(c.batch * c.seq), 0);
  for (int r = 0; r < p.world(); ++r)
    for (int mb = 0; mb < c.microbatches; ++mb) {
      const MicrobatchData d = microbatch_data(c, p, grid.coords(r), TokenSource(3), 0, mb);
      for (size_t i = 0; i < d.token_index.size(); ++i) {
        const size_t t = static_cast<size_t>(d.token_index[i]);
        seen[t] += 1;
        EXPECT_EQ(d.ids[i], all.inputs[t]);
        EXPECT_EQ(d.targets[i], all.targets[t]);
      }
    }
  for (int n : seen) EXPECT_EQ(n, 1);
  // Row 0: positions 0..3 are sequence 0 (slots 0..4), 4..7 sequence 1 (slots 5..9).
  EXPECT_EQ(all.targets[2], all.inputs[3]);
  EXPECT_NE(all.targets[3], all.inputs[4]) << "the last target of sequence 0 is its own token";
  // Unpacked rows read the [B, s + 1] tokens shifted by one, as before.
  c.seq_lens.clear();
  const GlobalBatch plain = global_batch(c, TokenSource(3), 0);
  const std::vector<int64_t> tokens = global_tokens(c, TokenSource(3), 0);
  EXPECT_EQ(plain.inputs[9], tokens[10]);  // row 1, position 1: slot 9 + 1
  EXPECT_EQ(plain.targets[9], tokens[11]);
}

}  // namespace
}  // namespace sextant::model
