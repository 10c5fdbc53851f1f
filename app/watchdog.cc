#include "app/watchdog.h"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "harness/stall_report.h"
#include "harness/strings.h"

namespace sextant {

std::unique_ptr<Heartbeat> open_node_heartbeat(MpiCommunicator& world) {
  MPI_Comm node_handle;
  check_mpi(MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_handle),
            "MPI_Comm_split_type");
  MpiCommunicator node(node_handle, true);
  // Unique on every node: world rank 0's pid and a random number.
  std::string mine;
  if (world.rank() == 0) mine = cat("/sextant-heartbeat-", getpid(), "-", std::random_device{}());
  // One segment per node: nodes that share /dev/shm (containers or network
  // namespaces on one machine) must not open each other's.
  const int node_first = static_cast<int>(node.all_reduce_value(world.rank(), ReduceOp::min));
  const std::string name = cat(all_gather_strings(world, mine)[0], "-", node_first);

  std::unique_ptr<Heartbeat> heartbeat;
  std::string error;
  const bool leader = node.rank() == 0;
  auto take = [&](bool create) {
    try {
      heartbeat = std::make_unique<Heartbeat>(name, node.size(), node.rank(), world.rank(), create);
    } catch (const std::exception& e) {
      error = e.what();
    }
  };
  if (leader) take(true);
  const std::string leader_error = all_gather_strings(node, error)[0];
  if (!leader && leader_error.empty()) take(false);
  node.barrier();  // every rank of the node has mapped the segment: its name can go
  if (leader && heartbeat) Heartbeat::unlink(name);
  if (!heartbeat) {
    std::fprintf(stderr, "sextant: warning: rank %d: no shared heartbeat (%s); a timeout will report this rank only\n",
                 world.rank(), (leader_error.empty() ? error : leader_error).c_str());
    heartbeat = std::make_unique<Heartbeat>("", 1, 0, world.rank(), false);
  }
  return heartbeat;
}

Watchdog::Watchdog(Settings settings, Heartbeat& heartbeat)
    : settings_(std::move(settings)), heartbeat_(heartbeat), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::loop() {
  const bool root = settings_.world_rank == 0;
  const double limit = settings_.limit_s;
  bool reported = false;  // for the current stretch of being armed
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; });
      if (stop_) return;
    }
    if (std::isinf(limit)) continue;
    const RankPosition self = heartbeat_.read(heartbeat_.slot());
    if (!self.consistent) continue;  // a write in progress all along: read again on the next tick
    if (!self.armed || self.armed_s <= limit) {
      reported = false;
      continue;
    }
    const bool end_job = root || self.armed_s > limit + kGraceSeconds;
    if (!end_job && (reported || !settings_.node_leader)) continue;
    if (!reported) {
      const Report r = report(self);
      std::fprintf(stderr, "%s", r.text.c_str());
      std::fflush(stderr);
      if (root && settings_.abandon) settings_.abandon(r.reason);
      reported = true;
    }
    if (end_job) MPI_Abort(MPI_COMM_WORLD, 3);
  }
}

// Two heartbeat reads half a second apart tell the ranks that still make
// progress from those that do not.
Watchdog::Report Watchdog::report(const RankPosition& self) {
  const std::vector<RankPosition> before = heartbeat_.read();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::vector<RankPosition> after = heartbeat_.read();
  std::vector<char> states;
  int visible = 0;
  for (const RankPosition& p : after) {
    states.push_back(p.pid ? process_state(p.pid) : '?');
    visible += p.pid != 0;
  }
  const StallReport stall = analyze_stall(before, after, states);

  const std::string head = cat("timeout: rank ", settings_.world_rank, " spent more than --timeout ", settings_.limit_s,
                               " s at ", settings_.describe_case(self.case_index), " (phase ", self.phase, ")");
  std::vector<std::string> ranks = stall.ranks;
  if (visible < settings_.world_size)
    ranks.push_back(cat(settings_.world_size - visible,
                        " ranks run on other hosts and are not visible here "
                        "(the first rank of each host prints its own)"));
  Report r;
  r.text = cat("sextant: ", head, "\nsextant: ", stall.summary, "\n");
  for (const std::string& line : ranks) r.text += "sextant:   " + line + "\n";
  r.reason = cat(head, "; ", stall.summary, "; ", join(ranks, "; "));
  return r;
}

}  // namespace sextant
