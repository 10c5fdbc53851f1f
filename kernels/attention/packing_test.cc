#include "kernels/attention/packing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "harness/error.h"
#include "kernels/attention/layout.h"
#include "kernels/ops/attention_mask.h"

namespace sextant::cp {
namespace {

constexpr int64_t kPad = -1;  // ops::AttentionMask::kPaddingRow

TEST(Packing, PadsEverySequenceToTheMultiple) {
  const Packing p = pack_sequences({40, 8, 17}, 8);
  EXPECT_EQ(p.padded, (std::vector<int64_t>{40, 8, 24}));
  EXPECT_EQ(p.tokens(), 65);
  EXPECT_EQ(p.rows(), 72);
  EXPECT_EQ(p.padding(), 7);
  EXPECT_EQ(p.cu_seqlens(), (std::vector<int64_t>{0, 40, 48, 65}));
  EXPECT_EQ(p.cu_seqlens_padded(), (std::vector<int64_t>{0, 40, 48, 72}));
  EXPECT_EQ(pack_sequences({5}, 1).padded, (std::vector<int64_t>{5}));
  EXPECT_THROW(pack_sequences({4, -1}, 2), RuntimeError);
  // A sequence of no tokens takes no rows; padding after the last is an entry of no tokens.
  const Packing tail = pack_sequences({3, 0, 5}, 4, 1);
  EXPECT_EQ(tail.lengths, (std::vector<int64_t>{3, 0, 5, 0}));
  EXPECT_EQ(tail.padded, (std::vector<int64_t>{4, 0, 8, 4}));
  EXPECT_EQ(tail.rows(), 16);
  EXPECT_EQ(tail.tokens(), 8);
  EXPECT_EQ(sequence_of_rows(tail, {0, 3, 4, 11, 12, 15}),
            (std::vector<int64_t>{0, ops::AttentionMask::kPaddingRow, 4, ops::AttentionMask::kPaddingRow,
                                  ops::AttentionMask::kPaddingRow, ops::AttentionMask::kPaddingRow}));
  EXPECT_EQ(token_of_row(tail, 4), 3);
  EXPECT_EQ(token_of_row(tail, 13), -1);
  EXPECT_THROW(pack_sequences({4}, 2, -1), RuntimeError);
}

TEST(Packing, RowsNameTheirSequenceOrPadding) {
  const Packing p = pack_sequences({3, 2}, 4);  // rows: 0 1 2 pad | 4 5 pad pad
  EXPECT_EQ(sequence_of_rows(p, {0, 2, 3, 4, 5, 6, 7}), (std::vector<int64_t>{0, 0, kPad, 4, 4, kPad, kPad}));
  EXPECT_EQ(token_of_row(p, 2), 2);
  EXPECT_EQ(token_of_row(p, 3), -1);
  EXPECT_EQ(token_of_row(p, 5), 4);
  EXPECT_EQ(token_of_row(p, 8), -1);
}

// Per-sequence zigzag: every row once, and every rank the same causal work
// when no sequence is padded; contiguous cuts the stream.
TEST(Packing, PerSequenceZigzagCoversAndBalances) {
  const Packing p = pack_sequences({40, 8, 16}, 8);
  for (int cp : {1, 2, 4}) {
    std::vector<int64_t> all, work;
    for (int r = 0; r < cp; ++r) {
      const std::vector<int64_t> rows = positions_of(shard_chunks(Layout::zigzag, p, cp, r));
      all.insert(all.end(), rows.begin(), rows.end());
      work.push_back(causal_pairs_of_rows(p, rows));
    }
    std::sort(all.begin(), all.end());
    std::vector<int64_t> expect(64);
    std::iota(expect.begin(), expect.end(), 0);
    EXPECT_EQ(all, expect) << cp;
    EXPECT_EQ(*std::min_element(work.begin(), work.end()), *std::max_element(work.begin(), work.end())) << cp;
    EXPECT_EQ(std::accumulate(work.begin(), work.end(), int64_t{0}), causal_pairs(p)) << cp;
  }
  // cp 2: rank 0 holds chunks 0 and 3 of every sequence (10, 2, 4 rows each).
  EXPECT_EQ(shard_chunks(Layout::zigzag, p, 2, 0).size(), 6u);
  EXPECT_EQ(shard_chunks(Layout::zigzag, p, 2, 0)[2].start, 40);
  EXPECT_EQ(positions_of(shard_chunks(Layout::contiguous, p, 2, 1)).front(), 32);
  EXPECT_THROW(shard_chunks(Layout::zigzag, pack_sequences({12, 4}, 1), 4, 0), RuntimeError);
}

TEST(Packing, ZipfLengthsAreLongTailedAndDeterministic) {
  const std::vector<int64_t> a = zipf_lengths(16, 1024, 7), b = zipf_lengths(16, 1024, 7);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, zipf_lengths(16, 1024, 8));
  EXPECT_EQ(std::accumulate(a.begin(), a.end(), int64_t{0}), 1024);
  EXPECT_GE(*std::min_element(a.begin(), a.end()), 1);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  // Long tail: the longest is several times the median.
  EXPECT_GT(sorted.back(), 3 * sorted[8]);
  EXPECT_EQ(zipf_lengths(4, 4, 1), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(Packing, ParsesSeqLensOrSaysTheRule) {
  EXPECT_EQ(parse_seq_lens("40,8,16", 64, 1), (std::vector<int64_t>{40, 8, 16}));
  EXPECT_EQ(parse_seq_lens("zipf:5", 64, 3).size(), 5u);
  auto message = [](const std::string& spec, int64_t seq) {
    try {
      parse_seq_lens(spec, seq, 1);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("40,8", 64), "--set seq_lens=40,8: the lengths sum to 48, not --seq 64");
  EXPECT_EQ(message("64,0", 64), "accepted");  // a sequence of no tokens
  EXPECT_EQ(message("0,0", 0), "--set seq_lens=0,0: at least one sequence must have a token");
  EXPECT_EQ(message("70,-6", 64), "--set seq_lens=70,-6: length -6 must not be negative");
  EXPECT_EQ(message("a,b", 64), "--set seq_lens=a,b must be a comma-separated list of lengths or zipf:N");
  EXPECT_EQ(message("zipf:0", 64), "--set seq_lens=zipf:0: zipf:N needs a positive count N");
  EXPECT_EQ(message("zipf:65", 64), "--set seq_lens=zipf:65: 65 sequences of at least one token must fit --seq 64");
  // Padding in the data: the padded lengths and the tail fill --seq rows.
  EXPECT_EQ(parse_seq_lens("19,1,0,2", 32, 1, 4, 4), (std::vector<int64_t>{19, 1, 0, 2}));  // 20 + 4 + 0 + 4 + 4
  try {
    parse_seq_lens("19,1,0,2", 36, 1, 4, 4);
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "--set seq_lens=19,1,0,2: the lengths padded to multiples of 4 and 4 rows of tail padding fill 32 "
                 "rows, not --seq 36");
  }
  EXPECT_THROW(parse_seq_lens("zipf:3", 32, 1, 4, 0), UsageError);
}

TEST(Packing, RequirePackedLengthsHoldsAnyListToTheParsersRules) {
  auto message = [](const std::vector<int64_t>& lengths, int64_t seq, int64_t multiple = 1, int64_t tail = 0) {
    try {
      require_packed_lengths("--set seq_lens", lengths, seq, multiple, tail);
      return std::string("accepted");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(message({40, 8, 16}, 64), "accepted");
  EXPECT_EQ(message({40, 8}, 64), "--set seq_lens: the lengths sum to 48, not --seq 64");
  EXPECT_EQ(message({0, 0}, 0), "--set seq_lens: at least one sequence must have a token");
  EXPECT_EQ(message({70, -6}, 64), "--set seq_lens: length -6 must not be negative");
  EXPECT_EQ(message({19, 1, 0, 2}, 32, 4, 4), "accepted");  // 20 + 4 + 0 + 4 + tail 4
  EXPECT_EQ(message({19, 1}, 32, 4),
            "--set seq_lens: the lengths padded to multiples of 4 and 0 rows of tail "
            "padding fill 24 rows, not --seq 32");
}

}  // namespace
}  // namespace sextant::cp
