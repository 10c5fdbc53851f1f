#include "kernels/attention/layout.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::cp {

std::string layout_name(Layout layout) { return layout == Layout::zigzag ? "zigzag" : "contiguous"; }

Layout parse_layout(const std::string& name) {
  if (name == "contiguous") return Layout::contiguous;
  if (name == "zigzag") return Layout::zigzag;
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

std::vector<int64_t> positions_of(const std::vector<Chunk>& chunks) {
  std::vector<int64_t> pos;
  for (const Chunk& c : chunks)
    for (int64_t i = 0; i < c.length; ++i) pos.push_back(c.start + i);
  return pos;
}

}  // namespace sextant::cp
