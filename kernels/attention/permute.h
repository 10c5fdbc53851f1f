// Reorders blocks of a tensor: the copy behind every all-to-all and
// all-gather layout change of CP attention (rows of the last dim move whole),
// and the f32 sum that accumulates blocks' gradients. Host or device tensors
// (the result lives where x does).
#pragma once

#include <vector>

#include "harness/tensor.h"

namespace sextant::cp {

// x viewed as `view` (same element count, any dtype); returns a new tensor
// whose dim i is view dim order[i]. The last dim must stay last.
//   permute_rows(x, {b, n, P, h, d}, {2, 0, 1, 3, 4}) -> [P, b, n, h, d]
Tensor permute_rows(const Tensor& x, const Shape& view, const std::vector<int>& order);

// acc += x, both f32 of one shape on one device.
void add_into(Tensor& acc, const Tensor& x);

}  // namespace sextant::cp
