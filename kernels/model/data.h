// The training data: a global batch of B sequences of s + 1 token ids per
// step (inputs are tokens [:, :s], targets [:, 1:], as reference/gpt.h reads
// them), and the piece of it a rank holds:
//
//   DP splits the sequences: replica d holds sequences [d B/dp, (d+1) B/dp)
//   microbatches split those further into m groups of b = B/(dp m)
//   CP shards each sequence by the layout (zigzag: chunks c and 2cp-1-c)
//   SP shards the CP rows within TP (the embedding and the layers do that)
//
// Tokens come from the counter RNG (uniform ids below --vocab) or, with
// --set data=PREFIX, from a Megatron indexed dataset: its documents laid end
// to end (with their end-of-document tokens, as Megatron's GPTDataset
// concatenates them) and a window of s + 1 tokens per sequence, starting at
// an offset drawn from (seed, step, sequence). Either way a token is a
// function of (seed, step, sequence, position) alone, so every rank and the
// float64 reference read the same batch whatever the sharding.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/grid.h"
#include "kernels/model/gpt_config.h"
#include "kernels/model/indexed_dataset.h"

namespace sextant::model {

class TokenSource {
 public:
  explicit TokenSource(uint64_t seed, std::shared_ptr<const IndexedDataset> dataset = nullptr);
  // Tokens [0, s] of sequence `sequence` of step `step`'s global batch.
  std::vector<int64_t> sequence(const GptConfig& c, int64_t step, int64_t sequence) const;
  // Where the window of that sequence starts in the dataset's tokens (datasets only).
  int64_t window_start(const GptConfig& c, int64_t step, int64_t sequence) const;
  const IndexedDataset* dataset() const { return dataset_.get(); }

 private:
  uint64_t seed_;
  std::shared_ptr<const IndexedDataset> dataset_;
};

// The source a config asks for: random tokens, or the dataset of c.data
// (opened once per process), checked against the model: every token id
// below --vocab and at least s + 1 tokens. Throws UsageError.
TokenSource token_source(const GptConfig& c, uint64_t seed);

// The whole batch [B, s + 1] row-major: what the reference reads.
std::vector<int64_t> global_tokens(const GptConfig& c, const TokenSource& source, int64_t step);

struct MicrobatchData {
  int64_t batch = 0, rows = 0;        // b sequences of `rows` = s/cp CP-local positions
  std::vector<int64_t> ids, targets;  // [b, rows]
  // Global index (sequence * s + position) of each row this rank holds outside
  // the TP region: [b, rows/tp] under SP, [b, rows] otherwise.
  std::vector<int64_t> token_index;
};

MicrobatchData microbatch_data(const GptConfig& c, const ParallelConfig& p, const RankCoords& at,
                               const TokenSource& source, int64_t step, int microbatch);

}  // namespace sextant::model
