// How a sequence is sharded over the CP ranks.
//   contiguous: rank r holds rows [r s/cp, (r+1) s/cp). Under a causal mask the
//     last rank sees the whole prefix and the first almost nothing: about
//     (2cp-1)x more score work on the busiest rank than on the idlest.
//   zigzag ("DualChunkSwap", Megatron/TE): the sequence is cut into 2cp chunks
//     and rank r holds chunks r and 2cp-1-r, an early and a late one, so that
//     every rank has the same causal work.
// Rows of a shard are stored in the order of its chunks.
// Packed sequences (packing.h): zigzag splits every sequence into 2cp chunks
// and gives rank r chunks r and 2cp-1-r of each (per-sequence zigzag, as
// TransformerEngine does for THD); contiguous cuts the packed stream into cp
// pieces wherever the sequences fall.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention/packing.h"

namespace sextant::cp {

enum class Layout { contiguous, zigzag };
std::string layout_name(Layout layout);        // "contiguous", "zigzag"
Layout parse_layout(const std::string& name);  // throws UsageError
int64_t layout_chunks(Layout layout, int cp);  // cp or 2cp: must divide the sequence

// Global rows [start, start + length).
struct Chunk {
  int64_t start = 0, length = 0;
};

// The chunks CP rank `rank` of `cp` holds, in local order. Throws
// RuntimeError when seq does not split into layout_chunks equal chunks.
std::vector<Chunk> shard_chunks(Layout layout, int64_t seq, int cp, int rank);

// The chunks of a packed stream (packing.rows() rows) that CP rank `rank`
// holds, sequence after sequence. Throws RuntimeError when a sequence
// (zigzag) or the stream (contiguous) does not split.
std::vector<Chunk> shard_chunks(Layout layout, const Packing& packing, int cp, int rank);

// Global position of every local row, chunk after chunk.
std::vector<int64_t> positions_of(const std::vector<Chunk>& chunks);

// Causal (query, key) pairs that rows at these stream positions compute
// against the whole pack: L(L+1)/2 summed per sequence when the rows are all
// of it. The work a shard hands its rank (padding rows compute nothing).
int64_t causal_pairs_of_rows(const Packing& packing, const std::vector<int64_t>& rows);

}  // namespace sextant::cp
