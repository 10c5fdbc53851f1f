#include "kernels/model/data.h"

#include "harness/rng.h"
#include "kernels/attention/layout.h"

namespace sextant::model {

int64_t token_at(const GptConfig& c, uint64_t seed, int64_t step, int64_t sequence, int64_t position) {
  const uint64_t index = static_cast<uint64_t>(sequence * (c.seq + 1) + position);
  return static_cast<int64_t>(random_bits(seed, tensor_id("step.tokens"), index, static_cast<uint64_t>(step)) %
                              static_cast<uint64_t>(c.vocab));
}

std::vector<int64_t> global_tokens(const GptConfig& c, uint64_t seed, int64_t step) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(c.batch * (c.seq + 1)));
  for (int64_t i = 0; i < c.batch; ++i)
    for (int64_t t = 0; t <= c.seq; ++t) out.push_back(token_at(c, seed, step, i, t));
  return out;
}

MicrobatchData microbatch_data(const GptConfig& c, const ParallelConfig& p, const RankCoords& at, uint64_t seed,
                               int64_t step, int microbatch) {
  MicrobatchData d;
  d.batch = c.batch / (static_cast<int64_t>(p.dp) * c.microbatches);
  const int64_t first = at.dp * (c.batch / p.dp) + microbatch * d.batch;
  const std::vector<int64_t> positions = cp::positions_of(cp::shard_chunks(c.cp_layout, c.seq, p.cp, at.cp));
  d.rows = static_cast<int64_t>(positions.size());
  const bool sp = p.sp && p.tp > 1;
  const int64_t shard = sp ? d.rows / p.tp : d.rows, shard0 = sp ? at.tp * shard : 0;
  for (int64_t i = first; i < first + d.batch; ++i) {
    for (int64_t r = 0; r < d.rows; ++r) {
      d.ids.push_back(token_at(c, seed, step, i, positions[r]));
      d.targets.push_back(token_at(c, seed, step, i, positions[r] + 1));
    }
    for (int64_t r = shard0; r < shard0 + shard; ++r) d.token_index.push_back(i * c.seq + positions[r]);
  }
  return d;
}

}  // namespace sextant::model
