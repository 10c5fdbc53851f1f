// Where a region's compute goes, op by op. Each op entry point (kernels/ops:
// gemm, attention, layernorm, ...) opens an OpTimer; while an OpTimes
// recording is open on the thread, the time of the outermost op is added
// under its name (an op inside another, like the gemms of the host
// attention, is part of that one). On the host: wall seconds. On a GPU: the
// compute stream's time between two events per call, read when the
// recording is. Without a recording an OpTimer does nothing, so the timed
// runs pay nothing for it.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "harness/device.h"

namespace sextant {

class OpTimes {
 public:
  OpTimes();  // opens the recording of this thread (throws RuntimeError if one is open)
  ~OpTimes();
  OpTimes(const OpTimes&) = delete;
  OpTimes& operator=(const OpTimes&) = delete;

  // Seconds per op name so far (waits for the GPU work recorded).
  std::map<std::string, double> seconds();

 private:
  friend class OpTimer;
  struct Pending {
    std::string op;
    void* start;
    void* stop;
  };
  std::map<std::string, double> seconds_;
  std::vector<Pending> pending_;  // GPU calls whose events are not read yet
};

class OpTimer {
 public:
  OpTimer(const char* op, Device device);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpTimes* times_ = nullptr;  // null: not timing (no recording, or inside another op)
  const char* op_;
  Device device_;
  std::chrono::steady_clock::time_point start_;
  void* start_event_ = nullptr;
};

}  // namespace sextant
