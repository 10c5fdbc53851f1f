#include "kernels/attention/layout.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "harness/error.h"
#include "kernels/attention/packing.h"

namespace sextant::cp {
namespace {

TEST(Layout, ContiguousShardsAreConsecutiveBlocks) {
  EXPECT_EQ(positions_of(shard_chunks(Layout::contiguous, 8, 4, 2)), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(positions_of(shard_chunks(Layout::contiguous, 6, 1, 0)), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(Layout, ZigzagRankHoldsChunksRAnd2cpMinus1MinusR) {
  // seq 16, cp 4: 8 chunks of 2; rank 1 holds chunks 1 and 6.
  EXPECT_EQ(positions_of(shard_chunks(Layout::zigzag, 16, 4, 1)), (std::vector<int64_t>{2, 3, 12, 13}));
  EXPECT_EQ(positions_of(shard_chunks(Layout::zigzag, 16, 4, 3)), (std::vector<int64_t>{6, 7, 8, 9}));
}

// Every position is held exactly once, and under a causal mask every zigzag
// rank has the same number of visible (query, key) pairs.
TEST(Layout, ZigzagCoversTheSequenceAndBalancesCausalWork) {
  const int64_t seq = 48;
  for (int cp : {1, 2, 3, 4}) {
    std::vector<int64_t> all;
    std::vector<int64_t> work;
    for (int r = 0; r < cp; ++r) {
      std::vector<int64_t> mine = positions_of(shard_chunks(Layout::zigzag, seq, cp, r));
      all.insert(all.end(), mine.begin(), mine.end());
      int64_t pairs = 0;
      for (int64_t p : mine) pairs += p + 1;
      work.push_back(pairs);
    }
    std::sort(all.begin(), all.end());
    for (int64_t i = 0; i < seq; ++i) EXPECT_EQ(all[i], i);
    EXPECT_EQ(*std::min_element(work.begin(), work.end()), *std::max_element(work.begin(), work.end())) << cp;
  }
}

TEST(Layout, RejectsSequencesThatDoNotSplit) {
  EXPECT_THROW(shard_chunks(Layout::zigzag, 12, 4, 0), RuntimeError);  // 8 chunks
  EXPECT_THROW(shard_chunks(Layout::contiguous, 10, 4, 0), RuntimeError);
  EXPECT_THROW(parse_layout("stripe"), UsageError);
  EXPECT_EQ(parse_layout("zigzag"), Layout::zigzag);
}

// One CP rank holds a packed stream whole, so zigzag takes lengths of any parity.
TEST(Layout, OneRankHoldsAPackedStreamWhole) {
  const Packing packing = pack_sequences({19, 1, 0, 2}, 1, 3);
  const std::vector<Chunk> chunks = shard_chunks(Layout::zigzag, packing, 1, 0);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].start, 0);
  EXPECT_EQ(chunks[0].length, 25);
  EXPECT_THROW(shard_chunks(Layout::zigzag, packing, 2, 0), RuntimeError);  // 19 rows do not zigzag over 2
}

}  // namespace
}  // namespace sextant::cp
