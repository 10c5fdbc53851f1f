// The training data: a global batch of B rows of s positions per step, and
// the piece of it a rank holds:
//
//   DP splits the rows: replica d holds rows [d B/dp, (d+1) B/dp)
//   microbatches split those further into m groups of b = B/(dp m)
//   CP shards each row by the layout (zigzag: chunks c and 2cp-1-c)
//   SP shards the CP rows within TP (the embedding and the layers do that)
//
// A row is one sequence of s + 1 tokens (inputs [:s], targets [1:], as
// reference/gpt.h reads them), or, packed (seq_lens, THD), several
// sequences: sequence j of length L > 0 has its own L + 1 tokens, inputs
// [:L] and targets [1:], so that no prediction crosses a sequence boundary;
// then its padding rows (pad_to), and after the last sequence the tail
// padding. A padding position reads token 0 and has no target
// (ops::kIgnoreTarget). CP zigzags every padded sequence on its own
// (kernels/attention/layout.h). A row of n non-empty sequences of T tokens
// in all thus reads T + n consecutive tokens, its "slots".
//
// Tokens come from the counter RNG (uniform ids below --vocab) or, with
// --set data=PREFIX, from a Megatron indexed dataset: its documents laid end
// to end (with their end-of-document tokens, as Megatron's GPTDataset
// concatenates them) and a window of a row's slots starting at an offset
// drawn from (seed, step, row). Either way a token is a function of (seed,
// step, row, slot) alone, so every rank and the float64 reference read the
// same batch whatever the sharding. With --set own_dataset=true the process
// first writes a dataset of its own (own_dataset_prefix) and reads it the
// same way: the sweeps reach the reader without a user's files.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/grid.h"
#include "kernels/attention/layout.h"
#include "kernels/model/gpt_config.h"
#include "kernels/model/indexed_dataset.h"

namespace sextant::model {

// The slots of a row: how many tokens it reads, and at which slot each
// position's input sits (its target is the next slot).
struct RowSlots {
  static constexpr int64_t kPadding = -1;      // of_position of a padding row
  static constexpr int64_t kPaddingInput = 0;  // the token a padding row reads
  int64_t per_row = 0;
  std::vector<int64_t> of_position;  // [s]: a slot, or kPadding
};
RowSlots row_slots(const GptConfig& c);

class TokenSource {
 public:
  explicit TokenSource(uint64_t seed, std::shared_ptr<const IndexedDataset> dataset = nullptr);
  // The per_row tokens of row `row` of step `step`'s global batch.
  std::vector<int64_t> row(const GptConfig& c, int64_t step, int64_t row) const;
  // Where that row's window starts in the dataset's tokens (datasets only).
  int64_t window_start(const GptConfig& c, int64_t step, int64_t row) const;
  const IndexedDataset* dataset() const { return dataset_.get(); }

 private:
  uint64_t seed_;
  std::shared_ptr<const IndexedDataset> dataset_;
};

// Where the process's own dataset lies, written on first use into a
// temporary directory removed at exit: 4096+ tokens (enough for one row of
// `per_row` slots) in documents of 1-48 tokens, ids in [1, vocab) and an
// end-of-document 0, uint16 (int32 past 65535), drawn from a fixed seed.
std::string own_dataset_prefix(int64_t vocab, int64_t per_row);

// The source a config asks for: random tokens, or the dataset of c.data
// (opened once per process), checked against the model: every token id
// below --vocab and at least one row's slots. Throws UsageError.
TokenSource token_source(const GptConfig& c, uint64_t seed);

// Every row's slots, [B, per_row] row-major (unpacked rows: the [B, s + 1] tokens).
std::vector<int64_t> global_tokens(const GptConfig& c, const TokenSource& source, int64_t step);

// The whole batch as inputs and next-token targets, [B, s] each: what the reference reads.
struct GlobalBatch {
  std::vector<int64_t> inputs, targets;
};
GlobalBatch global_batch(const GptConfig& c, const TokenSource& source, int64_t step);

// The packing of a row (packing.h; pad_to and tail_padding), and the CP chunks of rank cp_rank.
cp::Packing row_packing(const GptConfig& c);
std::vector<cp::Chunk> row_chunks(const GptConfig& c, int cp, int cp_rank);

struct MicrobatchData {
  int64_t batch = 0, rows = 0;        // b rows of `rows` = s/cp CP-local positions
  std::vector<int64_t> ids, targets;  // [b, rows]
  // Global index (row * s + position) of each position this rank holds
  // outside the TP region: [b, rows/tp] under SP, [b, rows] otherwise.
  std::vector<int64_t> token_index;
};

MicrobatchData microbatch_data(const GptConfig& c, const ParallelConfig& p, const RankCoords& at,
                               const TokenSource& source, int64_t step, int microbatch);

}  // namespace sextant::model
