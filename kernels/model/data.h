// The training data: a global batch of B sequences of s + 1 token ids per
// step from the counter RNG (inputs are tokens [:, :s], targets [:, 1:], as
// reference/gpt.h reads them), and the piece of it a rank holds:
//
//   DP splits the sequences: replica d holds sequences [d B/dp, (d+1) B/dp)
//   microbatches split those further into m groups of b = B/(dp m)
//   CP shards each sequence by the layout (zigzag: chunks c and 2cp-1-c)
//   SP shards the CP rows within TP (the embedding and the layers do that)
//
// Packed rows (seq_lens, THD): a row of s positions holds several sequences;
// sequence j of length L has its own L + 1 tokens, inputs [:L] and targets
// [1:], so that no prediction crosses a sequence boundary and every position
// is a real token (the step does not pad: the lengths must split for CP).
// CP then zigzags every sequence on its own (kernels/attention/layout.h).
#pragma once

#include <cstdint>
#include <vector>

#include "harness/grid.h"
#include "kernels/attention/layout.h"
#include "kernels/model/gpt_config.h"

namespace sextant::model {

// Token id at (sequence, position) of step `step`'s global batch, position in [0, s].
int64_t token_at(const GptConfig& c, uint64_t seed, int64_t step, int64_t sequence, int64_t position);
// The whole batch [B, s + 1] row-major (unpacked rows).
std::vector<int64_t> global_tokens(const GptConfig& c, uint64_t seed, int64_t step);

// The whole batch as inputs and next-token targets, [B, s] each: what the reference reads.
struct GlobalBatch {
  std::vector<int64_t> inputs, targets;
};
GlobalBatch global_batch(const GptConfig& c, uint64_t seed, int64_t step);

// The packing of a row (packing.h; no padding), and the CP chunks of rank cp_rank.
cp::Packing row_packing(const GptConfig& c);
std::vector<cp::Chunk> row_chunks(const GptConfig& c, int cp, int cp_rank);

struct MicrobatchData {
  int64_t batch = 0, rows = 0;        // b sequences of `rows` = s/cp CP-local positions
  std::vector<int64_t> ids, targets;  // [b, rows]
  // Global index (sequence * s + position) of each row this rank holds outside
  // the TP region: [b, rows/tp] under SP, [b, rows] otherwise.
  std::vector<int64_t> token_index;
};

MicrobatchData microbatch_data(const GptConfig& c, const ParallelConfig& p, const RankCoords& at, uint64_t seed,
                               int64_t step, int microbatch);

}  // namespace sextant::model
