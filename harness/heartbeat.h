// Heartbeat: where each rank is (case, phase, communicator call), published
// in a small POSIX shared-memory segment per node, one slot per rank, so that
// a watchdog in any process of the node can say which rank is stuck and where
// when a case runs past --timeout. In spirit PyTorch's NCCL flight recorder
// (torch/csrc/distributed/c10d/FlightRecorder.hpp), reduced to the last entry.
//
// Each slot is a seqlock: the owning rank makes the sequence odd, writes, and
// makes it even again; a reader retries until it sees the same even sequence
// before and after copying. Writers never wait, so publishing costs a few
// stores per communicator call.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace sextant {

// One rank's position as a reader sees it.
struct RankPosition {
  int world_rank = -1;
  int pid = 0;
  int case_index = 0;  // 1-based index into the run's plan; 0 before the first case
  bool armed = false;  // inside a case (or waiting at the end of a rank count): the watchdog counts
  double armed_s = 0;  // seconds since the case started (when armed)
  std::string phase;   // setup, check, a timed region, metrics, ...
  std::string call;    // communicator call in progress, or the last one ("all_reduce", "wait recv from 1")
  bool in_call = false;
  uint64_t calls = 0;      // communicator calls since the case started
  uint64_t sequence = 0;   // changes on every update: equal in two reads = no progress between them
  bool consistent = true;  // false: every read attempt met a write in progress (the fields are empty)
};

// The raw slot in shared memory (fixed size, no pointers).
struct HeartbeatSlot {
  std::atomic<uint64_t> sequence;
  int32_t world_rank, pid, case_index, in_call, peer;
  int64_t armed_since_ns;  // CLOCK_MONOTONIC (shared by every process of the node); 0 when not armed
  uint64_t calls;
  char phase[32];
  char call[40];
};

class Heartbeat {
 public:
  // Creates (`create`) or opens the named segment of `slots` slots and takes
  // slot `slot` for this process. Throws RuntimeError naming the segment. An
  // empty name maps private memory instead (one process: tests, or where
  // shared memory is not available).
  Heartbeat(const std::string& name, int slots, int slot, int world_rank, bool create);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Removes the name (mappings stay valid): called once every process has
  // opened it, so nothing is left behind however the run ends.
  static void unlink(const std::string& name);

  // Writer side: this process's slot.
  void begin(int case_index, const char* phase);  // arms
  void end();                                     // disarms
  void set_phase(const char* phase);
  void enter_call(const char* call, int peer = -1);
  void exit_call();

  // Reader side: every slot of the node.
  std::vector<RankPosition> read() const;
  RankPosition read(int slot) const;
  int slots() const { return slots_; }
  int slot() const { return slot_; }

  // The process-wide heartbeat the free functions below publish to (none by
  // default: they do nothing).
  static void install(Heartbeat* heartbeat);
  static Heartbeat* installed();

 private:
  template <class Fn>
  void write(Fn&& fn);
  HeartbeatSlot* slots_base_ = nullptr;
  size_t bytes_ = 0;
  int slots_ = 0, slot_ = 0;
};

// Publishing from the runner and the communicators (no-ops when no heartbeat
// is installed, e.g. in unit tests).
void heartbeat_begin(int case_index, const char* phase);
void heartbeat_end();
void heartbeat_phase(const char* phase);

// Marks a communicator call for its scope: `CommCallScope scope("all_reduce");`
// or, point to point, `CommCallScope scope("wait recv from", peer)` (group
// rank). `call` must outlive the scope (a literal).
class CommCallScope {
 public:
  explicit CommCallScope(const char* call, int peer = -1);
  ~CommCallScope();
  CommCallScope(const CommCallScope&) = delete;
  CommCallScope& operator=(const CommCallScope&) = delete;
};

// Run state of a process from /proc/PID/stat: 'R' running, 'S'/'D' sleeping,
// 'T'/'t' stopped (SIGSTOP, a debugger), 'Z' zombie; '?' when it is gone.
char process_state(int pid);

}  // namespace sextant
