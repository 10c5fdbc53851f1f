#include "kernels/attention/layout.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::cp {

std::string layout_name(Layout layout) { return layout == Layout::zigzag ? "zigzag" : "contiguous"; }

Layout parse_layout(const std::string& name) {
  if (std::optional<Layout> l =
          find_named<Layout>({{"contiguous", Layout::contiguous}, {"zigzag", Layout::zigzag}}, name))
    return *l;
  throw UsageError(cat("layout '", name, "' must be contiguous or zigzag"));
}

int64_t layout_chunks(Layout layout, int cp) { return layout == Layout::zigzag ? 2 * cp : cp; }

std::vector<Chunk> shard_chunks(Layout layout, int64_t seq, int cp, int rank) {
  const int64_t chunks = layout_chunks(layout, cp);
  if (cp < 1 || rank < 0 || rank >= cp || seq % chunks != 0)
    throw RuntimeError(cat("shard_chunks: ", layout_name(layout), " layout cannot split seq ", seq, " into ", chunks,
                           " chunks for rank ", rank, " of cp ", cp));
  const int64_t c = seq / chunks;
  if (layout == Layout::contiguous) return {{rank * c, c}};
  return {{rank * c, c}, {(2 * cp - 1 - rank) * c, c}};
}

std::vector<Chunk> shard_chunks(Layout layout, const Packing& packing, int cp, int rank) {
  if (layout == Layout::contiguous || !packing.packed()) return shard_chunks(layout, packing.rows(), cp, rank);
  // One rank holds the whole stream: each sequence's two zigzag chunks, in
  // order, are the sequence itself, so no length needs to split in two.
  if (cp == 1) return shard_chunks(Layout::contiguous, packing.rows(), cp, rank);
  std::vector<Chunk> chunks;
  int64_t start = 0;
  for (size_t i = 0; i < packing.padded.size(); ++i) {
    for (const Chunk& c : shard_chunks(layout, packing.padded[i], cp, rank))
      chunks.push_back({start + c.start, c.length});
    start += packing.padded[i];
  }
  return chunks;
}

int64_t causal_pairs_of_rows(const Packing& packing, const std::vector<int64_t>& rows) {
  const std::vector<int64_t> sequence = sequence_of_rows(packing, rows);
  int64_t pairs = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    if (sequence[i] >= 0) pairs += rows[i] - sequence[i] + 1;  // keys from the sequence's first row to its own
  return pairs;
}

std::vector<int64_t> positions_of(const std::vector<Chunk>& chunks) {
  std::vector<int64_t> pos;
  for (const Chunk& c : chunks)
    for (int64_t i = 0; i < c.length; ++i) pos.push_back(c.start + i);
  return pos;
}

}  // namespace sextant::cp
