// How a sequence is sharded over the CP ranks.
//   contiguous: rank r holds rows [r s/cp, (r+1) s/cp). Under a causal mask the
//     last rank sees the whole prefix and the first almost nothing: about
//     (2cp-1)x more score work on the busiest rank than on the idlest.
//   zigzag ("DualChunkSwap", Megatron/TE): the sequence is cut into 2cp chunks
//     and rank r holds chunks r and 2cp-1-r, an early and a late one, so that
//     every rank has the same causal work.
// Rows of a shard are stored in the order of its chunks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sextant::cp {

enum class Layout { contiguous, zigzag };
std::string layout_name(Layout layout);               // "contiguous", "zigzag"
Layout parse_layout(const std::string& name);         // throws UsageError
int64_t layout_chunks(Layout layout, int cp);         // cp or 2cp: must divide the sequence

// Global rows [start, start + length).
struct Chunk {
  int64_t start = 0, length = 0;
};

// The chunks CP rank `rank` of `cp` holds, in local order. Throws
// RuntimeError when seq does not split into layout_chunks equal chunks.
std::vector<Chunk> shard_chunks(Layout layout, int64_t seq, int cp, int rank);

// Global position of every local row, chunk after chunk.
std::vector<int64_t> positions_of(const std::vector<Chunk>& chunks);

}  // namespace sextant::cp
