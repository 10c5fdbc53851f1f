// Packed variable-length sequences (THD): several sequences one after
// another in one row of the batch, attention within each (TransformerEngine's
// cu_seqlens; transformer_engine/pytorch/attention/dot_product_attention/
// context_parallel.py). For CP every sequence is padded to a multiple of
// 2 cp rows and zigzagged on its own (layout.h), so that each rank holds an
// early and a late chunk of every sequence and the causal work balances.
//
//   tokens   the real tokens of the sequences, lengths[i] each (the data)
//   rows     the packed stream: sequence i occupies padded[i] >= lengths[i]
//            rows, its tokens first, then its padding rows
//
// A sequence may have no tokens (length 0: no rows, a repeated cu_seqlens
// entry), and the stream may end in padding after the last sequence (an
// entry of length 0 whose rows are all padding: pack_sequences' tail).
//
// A padding row sees no key and is seen by no query (attention_block.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sextant::cp {

struct Packing {
  std::vector<int64_t> lengths;  // tokens of each sequence; empty: not packed
  std::vector<int64_t> padded;   // rows each sequence occupies (>= its length)

  bool packed() const { return !lengths.empty(); }
  int64_t tokens() const;  // sum of lengths
  int64_t rows() const;    // sum of padded
  int64_t padding() const { return rows() - tokens(); }
  std::vector<int64_t> cu_seqlens() const;         // [n + 1] first token of each sequence, then the total
  std::vector<int64_t> cu_seqlens_padded() const;  // [n + 1] first row of each sequence, then the total
};

// Every length rounded up to a multiple of `multiple` (1: no padding), then
// `tail` rows of padding after the last sequence (rounded up the same way).
// Throws RuntimeError on a negative length or tail.
Packing pack_sequences(std::vector<int64_t> lengths, int64_t multiple, int64_t tail = 0);

// The sequence of every stream row in `rows`, named by the stream position
// of its first row (ops::AttentionMask's q_seq / k_seq), or
// ops::AttentionMask::kPaddingRow for a padding row.
std::vector<int64_t> sequence_of_rows(const Packing& packing, const std::vector<int64_t>& rows);

// The token a stream row holds, or -1 for a padding row.
int64_t token_of_row(const Packing& packing, int64_t row);

// Causal (query, key) pairs of the packed rows: sum over sequences of L (L + 1) / 2.
int64_t causal_pairs(const Packing& packing);

// --set seq_lens: "a,b,c" (lengths >= 0, one at least positive, summing to
// `seq`) or "zipf:N" (N lengths
// summing to `seq` drawn from `seed`: zipf_lengths). Throws UsageError naming
// the parameter and the rule.
//
// With padding that is part of the data (`multiple` > 1 or `tail` > 0: the
// step's rows), `seq` counts rows, and the lengths, each rounded up to a
// multiple of `multiple`, and the `tail` must fill them: a list only.
std::vector<int64_t> parse_seq_lens(const std::string& spec, int64_t seq, uint64_t seed, int64_t multiple = 1,
                                    int64_t tail = 0);

// The rules parse_seq_lens holds a list to (each length >= 0, one at least
// positive, filling `seq` as above), for lengths from anywhere (a --config
// file, a recipe); `name` starts each message.
void require_packed_lengths(const std::string& name, const std::vector<int64_t>& lengths, int64_t seq,
                            int64_t multiple = 1, int64_t tail = 0);

// N lengths >= 1 summing to `total`, proportional to independent Pareto
// draws with tail index 1.2 (a Zipf-like long tail: most sequences short, a
// few long), a pure function of (n, total, seed).
std::vector<int64_t> zipf_lengths(int64_t n, int64_t total, uint64_t seed);

}  // namespace sextant::cp
