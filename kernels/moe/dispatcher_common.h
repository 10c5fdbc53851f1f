// Pieces the two dispatchers share (not part of the public API).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "harness/timing.h"
#include "kernels/moe/dispatcher.h"

namespace sextant::moe {

// Adds the wall seconds of its scope to a counter.
class Stopwatch {
 public:
  explicit Stopwatch(double& total) : total_(total), start_(now_seconds()) {}
  ~Stopwatch() { total_ += now_seconds() - start_; }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  double& total_;
  double start_;
};

// Buffers kept between calls, by name. A dispatcher moves the same shapes in
// every iteration over one batch, and a fresh large allocation costs a page
// fault per 4 KiB on first touch (glibc maps big blocks and unmaps them on
// free). A buffer is reused while its shape and dtype match. One batch is in
// flight per dispatcher, so a name's buffer is free when its path runs again.
class BufferCache {
 public:
  Tensor& get(const std::string& name, const Shape& shape, DType dtype) {
    Tensor& t = buffers_[name];
    if (!t.defined() || t.shape() != shape || t.dtype() != dtype) t = Tensor::empty(shape, dtype);
    return t;
  }

 private:
  std::map<std::string, Tensor> buffers_;
};

// parts: [n * m, h], n blocks of m rows -> [m, h], their sum in block order
// (f32 accumulation, rounded once to the storage dtype).
Tensor sum_blocks(const Tensor& parts, int n);

std::unique_ptr<TokenDispatcher> make_alltoall_dispatcher(const DispatchComms& comms, int experts,
                                                          const DispatchFaults& faults);
std::unique_ptr<TokenDispatcher> make_allgather_dispatcher(const DispatchComms& comms, int experts,
                                                           const DispatchFaults& faults);

}  // namespace sextant::moe
