#include "kernels/model/data.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "harness/error.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "kernels/ops/cross_entropy.h"

namespace sextant::model {

RowSlots row_slots(const GptConfig& c) {
  RowSlots s;
  if (c.seq_lens.empty()) {
    s.per_row = c.seq + 1;
    for (int64_t o = 0; o < c.seq; ++o) s.of_position.push_back(o);
    return s;
  }
  const cp::Packing packing = row_packing(c);
  for (size_t i = 0; i < packing.lengths.size(); ++i) {
    const int64_t n = packing.lengths[i];
    for (int64_t o = 0; o < n; ++o) s.of_position.push_back(s.per_row + o);
    s.of_position.insert(s.of_position.end(), static_cast<size_t>(packing.padded[i] - n), RowSlots::kPadding);
    if (n > 0) s.per_row += n + 1;  // an empty sequence reads no tokens
  }
  return s;
}

TokenSource::TokenSource(uint64_t seed, std::shared_ptr<const IndexedDataset> dataset)
    : seed_(seed), dataset_(std::move(dataset)) {}

int64_t TokenSource::window_start(const GptConfig& c, int64_t step, int64_t row) const {
  const uint64_t starts = static_cast<uint64_t>(dataset_->tokens() - row_slots(c).per_row + 1);
  return static_cast<int64_t>(
      random_bits(seed_, tensor_id("step.data"), static_cast<uint64_t>(row), static_cast<uint64_t>(step)) % starts);
}

std::vector<int64_t> TokenSource::row(const GptConfig& c, int64_t step, int64_t row) const {
  const int64_t per_row = row_slots(c).per_row;
  std::vector<int64_t> out(static_cast<size_t>(per_row));
  if (dataset_) {
    dataset_->read(window_start(c, step, row), per_row, out.data());
    return out;
  }
  for (int64_t k = 0; k < per_row; ++k) {
    const uint64_t slot = static_cast<uint64_t>(row * per_row + k);
    out[k] = static_cast<int64_t>(random_bits(seed_, tensor_id("step.tokens"), slot, static_cast<uint64_t>(step)) %
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

// The directory of the process's own datasets, removed when the process exits.
struct OwnDatasets {
  std::filesystem::path dir;
  std::map<std::pair<int64_t, int64_t>, std::string> prefixes;  // (vocab, tokens) -> prefix
  ~OwnDatasets() {
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
};
}  // namespace

std::string own_dataset_prefix(int64_t vocab, int64_t per_row) {
  require(vocab >= 2, cat("--set own_dataset=true needs --vocab of at least 2, not ", vocab));
  static std::mutex mutex;
  static OwnDatasets own;
  std::lock_guard<std::mutex> lock(mutex);
  const int64_t tokens = std::max<int64_t>(4096, 4 * per_row);
  auto it = own.prefixes.find({vocab, tokens});
  if (it != own.prefixes.end()) return it->second;
  if (own.dir.empty()) {
    own.dir = std::filesystem::temp_directory_path() / cat("sextant-dataset-", ::getpid());
    std::filesystem::create_directories(own.dir);
  }
  std::vector<std::vector<int64_t>> documents;
  const uint64_t id = tensor_id("step.own_dataset");
  for (int64_t written = 0; written < tokens;) {
    const uint64_t d = documents.size();
    std::vector<int64_t> doc(1 + random_bits(0, id, d, 0) % 48);
    for (size_t i = 0; i + 1 < doc.size(); ++i)
      doc[i] = 1 + static_cast<int64_t>(random_bits(0, id, d, i + 1) % static_cast<uint64_t>(vocab - 1));
    doc.back() = 0;  // end of document
    written += static_cast<int64_t>(doc.size());
    documents.push_back(std::move(doc));
  }
  const std::string prefix = (own.dir / cat("tokens-v", vocab, "-n", tokens)).string();
  write_indexed_dataset(prefix, documents, vocab <= 65536 ? 8 : 4);
  return own.prefixes[{vocab, tokens}] = prefix;
}

TokenSource token_source(const GptConfig& c, uint64_t seed) {
  require(!(c.own_dataset && !c.data.empty()),
          cat("--set own_dataset=true and --set data=", c.data, " name two token sources: give one"));
  if (c.data.empty() && !c.own_dataset) return TokenSource(seed);
  const int64_t per_row = row_slots(c).per_row;
  const std::string prefix = c.own_dataset ? own_dataset_prefix(c.vocab, per_row) : c.data;
  std::shared_ptr<const IndexedDataset> d = open_once(prefix);
  require(d->max_token() < c.vocab, cat("--vocab ", c.vocab, " must exceed the largest token id ", d->max_token(),
                                        " in ", d->bin_path(), " (--set data=", c.data, ")"));
  require(d->tokens() >= per_row, cat("--set data=", c.data, " holds ", d->tokens(), " tokens, fewer than the ",
                                      per_row, " of one row (--seq ", c.seq, " and its targets)"));
  return TokenSource(seed, std::move(d));
}

std::vector<int64_t> global_tokens(const GptConfig& c, const TokenSource& source, int64_t step) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < c.batch; ++i) {
    const std::vector<int64_t> tokens = source.row(c, step, i);
    out.insert(out.end(), tokens.begin(), tokens.end());
  }
  return out;
}

GlobalBatch global_batch(const GptConfig& c, const TokenSource& source, int64_t step) {
  const RowSlots slots = row_slots(c);
  GlobalBatch b;
  for (int64_t i = 0; i < c.batch; ++i) {
    const std::vector<int64_t> tokens = source.row(c, step, i);
    for (int64_t t = 0; t < c.seq; ++t) {
      const int64_t slot = slots.of_position[static_cast<size_t>(t)];
      b.inputs.push_back(slot == RowSlots::kPadding ? RowSlots::kPaddingInput : tokens[slot]);
      b.targets.push_back(slot == RowSlots::kPadding ? ops::kIgnoreTarget : tokens[slot + 1]);
    }
  }
  return b;
}

cp::Packing row_packing(const GptConfig& c) {
  return c.seq_lens.empty() ? cp::Packing{} : cp::pack_sequences(c.seq_lens, c.pad_to, c.tail_padding);
}

std::vector<cp::Chunk> row_chunks(const GptConfig& c, int cp, int cp_rank) {
  if (c.seq_lens.empty()) return cp::shard_chunks(c.cp_layout, c.seq, cp, cp_rank);
  return cp::shard_chunks(c.cp_layout, row_packing(c), cp, cp_rank);
}

MicrobatchData microbatch_data(const GptConfig& c, const ParallelConfig& p, const RankCoords& at,
                               const TokenSource& source, int64_t step, int microbatch) {
  MicrobatchData d;
  d.batch = c.batch / (static_cast<int64_t>(p.dp) * c.microbatches);
  const int64_t first = at.dp * (c.batch / p.dp) + microbatch * d.batch;
  const std::vector<int64_t> positions = cp::positions_of(row_chunks(c, p.cp, at.cp));
  const RowSlots slots = row_slots(c);
  d.rows = static_cast<int64_t>(positions.size());
  const bool sp = p.sp && p.tp > 1;
  const int64_t shard = sp ? d.rows / p.tp : d.rows, shard0 = sp ? at.tp * shard : 0;
  for (int64_t i = first; i < first + d.batch; ++i) {
    const std::vector<int64_t> tokens = source.row(c, step, i);
    for (int64_t r = 0; r < d.rows; ++r) {
      const int64_t slot = slots.of_position[static_cast<size_t>(positions[r])];
      d.ids.push_back(slot == RowSlots::kPadding ? RowSlots::kPaddingInput : tokens[slot]);
      d.targets.push_back(slot == RowSlots::kPadding ? ops::kIgnoreTarget : tokens[slot + 1]);
    }
    for (int64_t r = shard0; r < shard0 + shard; ++r) d.token_index.push_back(i * c.seq + positions[r]);
  }
  return d;
}

}  // namespace sextant::model
