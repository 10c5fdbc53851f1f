// The per-case watchdog of `sextant run`: a thread on every rank that ends
// the job when this rank has been inside one case (or waiting for the others
// at a rank-count boundary) longer than --timeout, and first says which ranks
// are stuck and where every rank of the node is, from the heartbeat.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "harness/comm_mpi.h"
#include "harness/heartbeat.h"

namespace sextant {

// The node's heartbeat segment, one slot per rank of the node, created by
// the node's first rank and unlinked as soon as every rank has mapped it.
// Collective over world. Falls back to a private one-slot heartbeat (with a
// warning) where shared memory cannot be had.
std::unique_ptr<Heartbeat> open_node_heartbeat(MpiCommunicator& world);

class Watchdog {
 public:
  struct Settings {
    double limit_s = 900;  // +inf: never fires
    int world_rank = 0, world_size = 1;
    bool node_leader = false;  // the first rank of its node: reports its node's ranks
    // "case 7 of 40 'collectives/all_reduce ...'" for a heartbeat case index.
    std::function<std::string(int case_index)> describe_case;
    // World rank 0: writes the incomplete results before the job ends.
    std::function<void(const std::string& reason)> abandon;
  };
  // Ranks other than world rank 0 end the job only this much later, so that
  // rank 0, which holds the records, is the one that reports and writes.
  static constexpr double kGraceSeconds = 10;

  Watchdog(Settings settings, Heartbeat& heartbeat);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct Report {
    std::string text;    // the lines for stderr
    std::string reason;  // one line for the incomplete results file
  };
  void loop();
  Report report(const RankPosition& self);
  Settings settings_;
  Heartbeat& heartbeat_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sextant
