// Pieces the two dispatchers share (not part of the public API).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "harness/comm_values.h"
#include "harness/device.h"
#include "harness/timing.h"
#include "kernels/moe/dispatcher.h"

namespace sextant::moe {

// Adds the wall seconds of its scope to a counter. On the device the GPU
// work of the scope counts: the device is synchronized before each clock
// read, so work queued before the scope is not billed to it.
class Stopwatch {
 public:
  explicit Stopwatch(double& total, Device device = Device::host)
      : total_(total), sync_(device != Device::host), start_(read()) {}
  ~Stopwatch() { total_ += read() - start_; }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  double read() const {
    if (sync_) cuda_synchronize();
    return now_seconds();
  }
  double& total_;
  bool sync_;
  double start_;
};

// Buffers kept between calls, by name. A dispatcher moves the same shapes in
// every iteration over one batch, and a fresh large allocation costs a page
// fault per 4 KiB on first touch (glibc maps big blocks and unmaps them on
// free). A buffer is reused while its shape and dtype match. One batch is in
// flight per dispatcher, so a name's buffer is free when its path runs again.
class BufferCache {
 public:
  Tensor& get(const std::string& name, const Shape& shape, DType dtype, Device device = Device::host) {
    Tensor& t = buffers_[name];
    if (!t.defined() || t.shape() != shape || t.dtype() != dtype || t.device() != device)
      t = Tensor::empty(shape, dtype, device);
    return t;
  }

 private:
  std::map<std::string, Tensor> buffers_;
};

// parts: [n * m, h], n blocks of m rows -> [m, h], their sum in block order
// (f32 accumulation, rounded once to the storage dtype), on parts' device.
Tensor sum_blocks(const Tensor& parts, int n);

std::unique_ptr<TokenDispatcher> make_alltoall_dispatcher(const DispatchComms& comms, int experts,
                                                          const DispatchFaults& faults);
std::unique_ptr<TokenDispatcher> make_allgather_dispatcher(const DispatchComms& comms, int experts,
                                                           const DispatchFaults& faults);

}  // namespace sextant::moe
