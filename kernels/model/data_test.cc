// The step's token source: random tokens as before, and windows of an
// indexed dataset that depend on (seed, step, sequence) alone.
#include "kernels/model/data.h"

#include <gtest/gtest.h>

#include <set>

#include "harness/error.h"
#include "kernels/attention/layout.h"
#include "kernels/model/testing/indexed_files.h"

namespace sextant::model {
namespace {

GptConfig tiny() {
  GptConfig c;
  c.vocab = 16, c.seq = 8, c.batch = 4, c.layers = 2;
  c.moe = {false, false};
  return c;
}

// Two documents of byte-like tokens, each ending with the end-of-document id 9.
std::string dataset_prefix() {
  static const std::string prefix =
      testing::Files::of<uint16_t>({{1, 2, 3, 4, 5, 6, 7, 9}, {8, 7, 6, 5, 4, 3, 2, 1, 0, 9}}, 8).write("data");
  return prefix;
}
const std::vector<int64_t> kStream = {1, 2, 3, 4, 5, 6, 7, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 9};

TEST(TokenSource, RandomTokensAreTheCounterRng) {
  const GptConfig c = tiny();
  const TokenSource a(7), b(7), other(8);
  EXPECT_EQ(a.row(c, 2, 1), b.row(c, 2, 1));
  EXPECT_NE(a.row(c, 2, 1), other.row(c, 2, 1));
  EXPECT_NE(a.row(c, 2, 1), a.row(c, 3, 1));
  for (int64_t t : a.row(c, 0, 0)) EXPECT_TRUE(t >= 0 && t < c.vocab);
  EXPECT_EQ(a.dataset(), nullptr);
}

TEST(TokenSource, DatasetWindowsAreDocumentsEndToEnd) {
  GptConfig c = tiny();
  c.data = dataset_prefix();
  const TokenSource source = token_source(c, 5);
  ASSERT_NE(source.dataset(), nullptr);
  std::set<int64_t> starts;
  for (int64_t step = 0; step < 8; ++step)
    for (int64_t i = 0; i < c.batch; ++i) {
      const int64_t start = source.window_start(c, step, i);
      ASSERT_GE(start, 0);
      ASSERT_LE(start + c.seq + 1, static_cast<int64_t>(kStream.size()));
      starts.insert(start);
      const std::vector<int64_t> want(kStream.begin() + start, kStream.begin() + start + c.seq + 1);
      EXPECT_EQ(source.row(c, step, i), want) << "step " << step << " sequence " << i;
      EXPECT_EQ(token_source(c, 5).row(c, step, i), want) << "deterministic";
    }
  EXPECT_GT(starts.size(), 3u) << "windows start at many offsets";
  EXPECT_NE(token_source(c, 6).window_start(c, 0, 0) * 100 + token_source(c, 6).window_start(c, 0, 1),
            source.window_start(c, 0, 0) * 100 + source.window_start(c, 0, 1))
      << "the seed moves the windows";
}

// Every rank's microbatch is a slice of the batch the reference reads.
TEST(TokenSource, ShardsReadTheGlobalBatch) {
  GptConfig c = tiny();
  c.data = dataset_prefix();
  c.microbatches = 2;
  const TokenSource source = token_source(c, 3);
  const std::vector<int64_t> all = global_tokens(c, source, 1);
  ParallelConfig p{1, 2, 1, 2};  // cp2 dp2
  const RankGrid grid(p, p.world());
  for (int r = 0; r < p.world(); ++r)
    for (int mb = 0; mb < c.microbatches; ++mb) {
      const MicrobatchData d = microbatch_data(c, p, grid.coords(r), source, 1, mb);
      const std::vector<int64_t> positions =
          cp::positions_of(cp::shard_chunks(c.cp_layout, c.seq, p.cp, grid.coords(r).cp));
      for (int64_t i = 0; i < d.batch; ++i)
        for (int64_t row = 0; row < d.rows; ++row) {
          const int64_t sequence = grid.coords(r).dp * (c.batch / p.dp) + mb * d.batch + i;
          EXPECT_EQ(d.ids[i * d.rows + row], all[sequence * (c.seq + 1) + positions[row]]);
          EXPECT_EQ(d.targets[i * d.rows + row], all[sequence * (c.seq + 1) + positions[row] + 1]);
        }
    }
}

TEST(TokenSource, RefusesADatasetTheModelCannotRead) {
  GptConfig c = tiny();
  c.data = dataset_prefix();
  c.vocab = 9;  // the end-of-document id 9 needs vocab 10
  try {
    token_source(c, 1);
    ADD_FAILURE() << "vocab 9 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--vocab 9 must exceed the largest token id 9"), std::string::npos)
        << e.what();
  }
  c.vocab = 16;
  c.seq = 18;  // 19 tokens per sequence, 18 in the dataset
  EXPECT_THROW(token_source(c, 1), UsageError);
  c.seq = 17;
  EXPECT_NO_THROW(token_source(c, 1));
}

}  // namespace
}  // namespace sextant::model
