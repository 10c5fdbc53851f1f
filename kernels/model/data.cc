#include "kernels/model/data.h"

#include <map>
#include <mutex>

#include "harness/error.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "kernels/attention/layout.h"

namespace sextant::model {

TokenSource::TokenSource(uint64_t seed, std::shared_ptr<const IndexedDataset> dataset)
    : seed_(seed), dataset_(std::move(dataset)) {}

int64_t TokenSource::window_start(const GptConfig& c, int64_t step, int64_t sequence) const {
  const uint64_t starts = static_cast<uint64_t>(dataset_->tokens() - c.seq);  // windows of s + 1 tokens
  return static_cast<int64_t>(random_bits(seed_, tensor_id("step.data"), static_cast<uint64_t>(sequence),
                                          static_cast<uint64_t>(step)) %
                              starts);
}

std::vector<int64_t> TokenSource::sequence(const GptConfig& c, int64_t step, int64_t sequence) const {
  std::vector<int64_t> out(static_cast<size_t>(c.seq + 1));
  if (dataset_) {
    dataset_->read(window_start(c, step, sequence), c.seq + 1, out.data());
    return out;
  }
  for (int64_t t = 0; t <= c.seq; ++t) {
    const uint64_t index = static_cast<uint64_t>(sequence * (c.seq + 1) + t);
    out[t] = static_cast<int64_t>(random_bits(seed_, tensor_id("step.tokens"), index, static_cast<uint64_t>(step)) %
                                  static_cast<uint64_t>(c.vocab));
  }
  return out;
}

namespace {
// Datasets stay open for the process: the trainer, the baseline and the
// reference of every case read the same files.
std::shared_ptr<const IndexedDataset> open_once(const std::string& prefix) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const IndexedDataset>> open;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = open.find(prefix);
  if (it == open.end()) it = open.emplace(prefix, IndexedDataset::open(prefix)).first;
  return it->second;
}
}  // namespace

TokenSource token_source(const GptConfig& c, uint64_t seed) {
  if (c.data.empty()) return TokenSource(seed);
  std::shared_ptr<const IndexedDataset> d = open_once(c.data);
  require(d->max_token() < c.vocab, cat("--vocab ", c.vocab, " must exceed the largest token id ", d->max_token(),
                                        " in ", d->bin_path(), " (--set data=", c.data, ")"));
  require(d->tokens() >= c.seq + 1, cat("--set data=", c.data, " holds ", d->tokens(), " tokens, fewer than the ",
                                        c.seq + 1, " of one sequence (--seq ", c.seq, " + 1)"));
  return TokenSource(seed, std::move(d));
}

std::vector<int64_t> global_tokens(const GptConfig& c, const TokenSource& source, int64_t step) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(c.batch * (c.seq + 1)));
  for (int64_t i = 0; i < c.batch; ++i) {
    const std::vector<int64_t> tokens = source.sequence(c, step, i);
    out.insert(out.end(), tokens.begin(), tokens.end());
  }
  return out;
}

MicrobatchData microbatch_data(const GptConfig& c, const ParallelConfig& p, const RankCoords& at,
                               const TokenSource& source, int64_t step, int microbatch) {
  MicrobatchData d;
  d.batch = c.batch / (static_cast<int64_t>(p.dp) * c.microbatches);
  const int64_t first = at.dp * (c.batch / p.dp) + microbatch * d.batch;
  const std::vector<int64_t> positions = cp::positions_of(cp::shard_chunks(c.cp_layout, c.seq, p.cp, at.cp));
  d.rows = static_cast<int64_t>(positions.size());
  const bool sp = p.sp && p.tp > 1;
  const int64_t shard = sp ? d.rows / p.tp : d.rows, shard0 = sp ? at.tp * shard : 0;
  for (int64_t i = first; i < first + d.batch; ++i) {
    const std::vector<int64_t> tokens = source.sequence(c, step, i);
    for (int64_t r = 0; r < d.rows; ++r) {
      d.ids.push_back(tokens[positions[r]]);
      d.targets.push_back(tokens[positions[r] + 1]);
    }
    for (int64_t r = shard0; r < shard0 + shard; ++r) d.token_index.push_back(i * c.seq + positions[r]);
  }
  return d;
}

}  // namespace sextant::model
