#include "harness/op_times.h"

#include "harness/error.h"

namespace sextant {

namespace {
thread_local OpTimes* recording = nullptr;
thread_local int depth = 0;  // ops open on this thread
}  // namespace

OpTimes::OpTimes() {
  if (recording) throw RuntimeError("OpTimes: a recording is already open on this thread");
  recording = this;
}

OpTimes::~OpTimes() {
  for (const Pending& p : pending_) cuda_destroy_event(p.start), cuda_destroy_event(p.stop);
  recording = nullptr;
}

std::map<std::string, double> OpTimes::seconds() {
  for (const Pending& p : pending_) {
    seconds_[p.op] += cuda_event_seconds(p.start, p.stop);
    cuda_destroy_event(p.start), cuda_destroy_event(p.stop);
  }
  pending_.clear();
  return seconds_;
}

OpTimer::OpTimer(const char* op, Device device) : op_(op), device_(device) {
  if (recording && depth == 0) {
    times_ = recording;
    if (device_ == Device::host) start_ = std::chrono::steady_clock::now();
    else start_event_ = cuda_record_event();
  }
  ++depth;
}

OpTimer::~OpTimer() {
  --depth;
  if (!times_) return;
  if (device_ == Device::host) {
    times_->seconds_[op_] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    return;
  }
  try {
    times_->pending_.push_back({op_, start_event_, cuda_record_event()});
  } catch (const std::exception&) {  // a destructor does not throw: the call goes uncounted
    cuda_destroy_event(start_event_);
  }
}

}  // namespace sextant
