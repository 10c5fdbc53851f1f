#include "kernels/model/data.h"

#include "harness/rng.h"
#include "kernels/attention/layout.h"

namespace sextant::model {

namespace {

// The token of counter slot `slot` of step `step`. Row i's slots start at
// i (s + n) for n sequences per row (n = 1 unpacked); sequence j of a row
// takes L_j + 1 consecutive slots, its inputs and its last target.
int64_t token_of_slot(const GptConfig& c, uint64_t seed, int64_t step, int64_t slot) {
  return static_cast<int64_t>(random_bits(seed, tensor_id("step.tokens"), static_cast<uint64_t>(slot),
                                          static_cast<uint64_t>(step)) %
                              static_cast<uint64_t>(c.vocab));
}

// The slot of the input at (row, position); its target is the next slot.
struct Slots {
  int64_t per_row = 0;
  std::vector<int64_t> of_position;  // [s]: slot offset of each position within its row
};
Slots slots_of(const GptConfig& c) {
  Slots s;
  const std::vector<int64_t> lengths = c.seq_lens.empty() ? std::vector<int64_t>{c.seq} : c.seq_lens;
  s.per_row = c.seq + static_cast<int64_t>(lengths.size());
  int64_t slot = 0;
  for (int64_t n : lengths) {
    for (int64_t o = 0; o < n; ++o) s.of_position.push_back(slot + o);
    slot += n + 1;
  }
  return s;
}

}  // namespace

int64_t token_at(const GptConfig& c, uint64_t seed, int64_t step, int64_t sequence, int64_t position) {
  return token_of_slot(c, seed, step, sequence * (c.seq + 1) + position);
}

std::vector<int64_t> global_tokens(const GptConfig& c, uint64_t seed, int64_t step) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(c.batch * (c.seq + 1)));
  for (int64_t i = 0; i < c.batch; ++i)
    for (int64_t t = 0; t <= c.seq; ++t) out.push_back(token_at(c, seed, step, i, t));
  return out;
}

GlobalBatch global_batch(const GptConfig& c, uint64_t seed, int64_t step) {
  const Slots slots = slots_of(c);
  GlobalBatch b;
  for (int64_t i = 0; i < c.batch; ++i)
    for (int64_t t = 0; t < c.seq; ++t) {
      const int64_t slot = i * slots.per_row + slots.of_position[static_cast<size_t>(t)];
      b.inputs.push_back(token_of_slot(c, seed, step, slot));
      b.targets.push_back(token_of_slot(c, seed, step, slot + 1));
    }
  return b;
}

cp::Packing row_packing(const GptConfig& c) {
  return c.seq_lens.empty() ? cp::Packing{} : cp::pack_sequences(c.seq_lens, 1);
}

std::vector<cp::Chunk> row_chunks(const GptConfig& c, int cp, int cp_rank) {
  if (c.seq_lens.empty()) return cp::shard_chunks(c.cp_layout, c.seq, cp, cp_rank);
  return cp::shard_chunks(c.cp_layout, row_packing(c), cp, cp_rank);
}

MicrobatchData microbatch_data(const GptConfig& c, const ParallelConfig& p, const RankCoords& at, uint64_t seed,
                               int64_t step, int microbatch) {
  MicrobatchData d;
  d.batch = c.batch / (static_cast<int64_t>(p.dp) * c.microbatches);
  const int64_t first = at.dp * (c.batch / p.dp) + microbatch * d.batch;
  const std::vector<int64_t> positions = cp::positions_of(row_chunks(c, p.cp, at.cp));
  const Slots slots = slots_of(c);
  d.rows = static_cast<int64_t>(positions.size());
  const bool sp = p.sp && p.tp > 1;
  const int64_t shard = sp ? d.rows / p.tp : d.rows, shard0 = sp ? at.tp * shard : 0;
  for (int64_t i = first; i < first + d.batch; ++i) {
    for (int64_t r = 0; r < d.rows; ++r) {
      const int64_t slot = i * slots.per_row + slots.of_position[static_cast<size_t>(positions[r])];
      d.ids.push_back(token_of_slot(c, seed, step, slot));
      d.targets.push_back(token_of_slot(c, seed, step, slot + 1));
    }
    for (int64_t r = shard0; r < shard0 + shard; ++r) d.token_index.push_back(i * c.seq + positions[r]);
  }
  return d;
}

}  // namespace sextant::model
