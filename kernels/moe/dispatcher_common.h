// Pieces the two dispatchers (and the MoE layer) share, not part of the
// public API: buffers kept between calls and the ordered sum of blocks.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/comm_values.h"
#include "harness/device.h"
#include "harness/memory_use.h"
#include "harness/tensor.h"
#include "harness/timing.h"

namespace sextant::moe {

// Buffers kept between calls, by name. A dispatcher moves the same shapes in
// every iteration over one batch, and a fresh large allocation costs a page
// fault per 4 KiB on first touch (glibc maps big blocks and unmaps them on
// free). A buffer is reused while its shape and dtype match. One batch is in
// flight per dispatcher, so a name's buffer is free when its path runs again,
// and a reshaped one is released before its replacement is allocated (the
// two together would be a peak no step needs).
class BufferCache {
 public:
  Tensor& get(const std::string& name, const Shape& shape, DType dtype, Device device = Device::host) {
    Tensor& t = buffers_[name];
    if (!t.defined() || t.shape() != shape || t.dtype() != dtype || t.device() != device) {
      MemoryScope scope(MemoryKind::communication);
      t = Tensor{};
      t = Tensor::empty(shape, dtype, device);
    }
    return t;
  }

 private:
  std::map<std::string, Tensor> buffers_;
};

// Planted fault wrong_rank: in per-expert counts [ranks * local], the last
// row bound for the first non-empty EP rank d < ranks - 1 is counted as the
// first row of rank d + 1, which treats it as a token of its first local expert.
void move_one_row_to_neighbour(std::vector<int64_t>& count, int ranks, int local);

// parts: [n * m, h], n blocks of m rows -> [m, h], their sum in block order
// (f32 accumulation, rounded once to the storage dtype), on parts' device.
Tensor sum_blocks(const Tensor& parts, int n);

}  // namespace sextant::moe
