#include "harness/comm_wrappers.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {

class Done : public Request {
 public:
  void wait() override {}
};

// Completes by copying whatever this rank isent with its tag.
class Copy : public Request {
 public:
  explicit Copy(std::function<void()> fn) : fn_(std::move(fn)) {}
  void wait() override {
    if (fn_) fn_();
    fn_ = nullptr;
  }

 private:
  std::function<void()> fn_;
};

}  // namespace

// Host buffers move with memmove; device buffers with cuda_copy (device to
// device, ordered on the GPU; the loopback never overlaps two regions of one buffer).
void LoopbackCommunicator::copy(void* dst, const void* src, size_t bytes) const {
  if (dst == src || bytes == 0) return;
  if (device() == Device::host) std::memmove(dst, src, bytes);
  else cuda_copy(dst, src, bytes);
}

void LoopbackCommunicator::all_reduce(const void* s, void* r, size_t n, DType t, ReduceOp) {
  copy(r, s, n * dtype_size(t));
}

void LoopbackCommunicator::reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp) {
  const size_t bytes = n * dtype_size(t);
  copy(r, static_cast<const char*>(s) + static_cast<size_t>(rank()) * bytes, bytes);
}

void LoopbackCommunicator::all_gather(const void* s, void* r, size_t n, DType t) {
  const size_t bytes = n * dtype_size(t);
  for (int p = 0; p < size(); ++p) copy(static_cast<char*>(r) + static_cast<size_t>(p) * bytes, s, bytes);
}

void LoopbackCommunicator::all_to_all(const void* s, void* r, size_t n, DType t) {
  copy(r, s, n * dtype_size(t) * static_cast<size_t>(size()));
}

void LoopbackCommunicator::all_to_all_v(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd,
                                        void* r, const std::vector<size_t>& rc, const std::vector<size_t>& rd,
                                        DType t) {
  const size_t e = dtype_size(t);
  for (size_t p = 0; p < rc.size() && p < sc.size(); ++p)
    copy(static_cast<char*>(r) + rd[p] * e, static_cast<const char*>(s) + sd[p] * e, std::min(rc[p], sc[p]) * e);
}

RequestPtr LoopbackCommunicator::isend(const void* b, size_t n, DType t, int, int tag) {
  sent_[tag] = {b, n * dtype_size(t)};
  return std::make_unique<Done>();
}

RequestPtr LoopbackCommunicator::irecv(void* b, size_t n, DType t, int, int tag) {
  const size_t bytes = n * dtype_size(t);
  return std::make_unique<Copy>([this, b, bytes, tag] {
    auto it = sent_.find(tag);
    if (it == sent_.end() || it->second.bytes != bytes)
      throw RuntimeError(cat("loopback: irecv of ", bytes, " B with tag ", tag, " has no matching isend"));
    copy(b, it->second.buffer, bytes);
  });
}

std::unique_ptr<Communicator> LoopbackCommunicator::split(int, int) {
  throw RuntimeError("loopback communicators do not split");
}

}  // namespace sextant
