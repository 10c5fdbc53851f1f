// Gathers the blocks of a distributed tensor onto rank 0 of a communicator
// so it can be compared with the reference as a whole.
#pragma once

#include <vector>

#include "harness/comm.h"
#include "harness/tensor.h"

namespace sextant {

// One rank's piece of a global tensor: `data` sits at `offset` (per dim).
struct Block {
  Tensor data;
  Shape offset;
};

struct Assembled {
  Tensor tensor;           // root: the global tensor (host), with its owner_ranks(); others: undefined
  int64_t uncovered = 0;   // root: elements no rank provided
  int64_t mismatched = 0;  // root: elements where replicas disagree bit for bit
};

// Collective over comm (a host communicator). Every rank passes its blocks
// (any number, possibly none); replicated elements (e.g. weights held by every
// DP rank) must agree exactly, and disagreement is counted, not hidden.
Assembled assemble(Communicator& comm, const std::vector<Block>& blocks, const Shape& global, DType dtype);

// Shorthand for a block at offset `start` along one dimension.
Block block_along(const Tensor& data, int dim, int64_t start);

}  // namespace sextant
