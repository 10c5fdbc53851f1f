#include "harness/heartbeat.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <thread>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "the sequence must be lock-free to live in shared memory");

std::atomic<Heartbeat*> g_installed{nullptr};

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

template <size_t N>
void copy_text(char (&to)[N], const char* from) {
  std::strncpy(to, from ? from : "", N - 1);
  to[N - 1] = '\0';
}

HeartbeatSlot* map_anonymous(size_t bytes) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw RuntimeError(cat("heartbeat: mmap: ", std::strerror(errno)));
  return static_cast<HeartbeatSlot*>(base);  // zero-filled: every slot starts at sequence 0
}

HeartbeatSlot* map_named(const std::string& name, size_t bytes, bool create) {
  int fd = shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) throw RuntimeError(cat("heartbeat: shm_open ", name, ": ", std::strerror(errno)));
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int error = errno;
    close(fd);
    throw RuntimeError(cat("heartbeat: ftruncate ", name, ": ", std::strerror(error)));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) throw RuntimeError(cat("heartbeat: mmap ", name, ": ", std::strerror(errno)));
  return static_cast<HeartbeatSlot*>(base);  // ftruncate zero-fills: every slot starts at sequence 0
}

}  // namespace

Heartbeat::Heartbeat(const std::string& name, int slots, int slot, int world_rank, bool create)
    : slots_(slots), slot_(slot) {
  if (slots < 1 || slot < 0 || slot >= slots)
    throw RuntimeError(cat("heartbeat ", name, ": slot ", slot, " outside 0..", slots - 1));
  bytes_ = sizeof(HeartbeatSlot) * static_cast<size_t>(slots);
  slots_base_ = name.empty() ? map_anonymous(bytes_) : map_named(name, bytes_, create);
  write([&](HeartbeatSlot& s) {
    s.world_rank = world_rank;
    s.pid = static_cast<int32_t>(getpid());
    s.peer = -1;
    copy_text(s.phase, "start");
  });
}

Heartbeat::~Heartbeat() {
  Heartbeat* self = this;
  g_installed.compare_exchange_strong(self, nullptr);
  munmap(slots_base_, bytes_);
}

void Heartbeat::unlink(const std::string& name) { shm_unlink(name.c_str()); }

// Only this process writes its slot, so the odd/even sequence is the whole
// protocol; the fences order the field stores between the two increments.
template <class Fn>
void Heartbeat::write(Fn&& fn) {
  HeartbeatSlot& s = slots_base_[slot_];
  s.sequence.fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  fn(s);
  std::atomic_thread_fence(std::memory_order_release);
  s.sequence.fetch_add(1, std::memory_order_relaxed);
}

void Heartbeat::begin(int case_index, const char* phase) {
  const int64_t now = monotonic_ns();
  write([&](HeartbeatSlot& s) {
    s.case_index = case_index;
    s.armed_since_ns = now;
    s.calls = 0;
    copy_text(s.phase, phase);
    copy_text(s.call, "");
    s.peer = -1;
  });
}

void Heartbeat::end() {
  write([](HeartbeatSlot& s) { s.armed_since_ns = 0; });
}

void Heartbeat::set_phase(const char* phase) {
  write([&](HeartbeatSlot& s) { copy_text(s.phase, phase); });
}

void Heartbeat::enter_call(const char* call, int peer) {
  write([&](HeartbeatSlot& s) {
    copy_text(s.call, call);
    s.peer = peer;
    ++s.in_call;
    ++s.calls;
  });
}

void Heartbeat::exit_call() {
  write([](HeartbeatSlot& s) {
    if (s.in_call > 0) --s.in_call;
  });
}

RankPosition Heartbeat::read(int slot) const {
  const HeartbeatSlot& s = slots_base_[slot];
  HeartbeatSlot copy{};  // zeros, should no attempt succeed
  uint64_t before = 0;
  bool consistent = false;
  // The writer may be descheduled between its two increments (ranks
  // oversubscribing the cores): yield to it rather than give up at once.
  for (int attempt = 0; attempt < 20000 && !consistent; ++attempt) {
    before = s.sequence.load(std::memory_order_acquire);
    if (before % 2 == 1) {  // a write in progress
      if (attempt >= 100) std::this_thread::yield();
      continue;
    }
    copy.world_rank = s.world_rank;
    copy.pid = s.pid;
    copy.case_index = s.case_index;
    copy.in_call = s.in_call;
    copy.peer = s.peer;
    copy.armed_since_ns = s.armed_since_ns;
    copy.calls = s.calls;
    std::memcpy(copy.phase, s.phase, sizeof copy.phase);
    std::memcpy(copy.call, s.call, sizeof copy.call);
    std::atomic_thread_fence(std::memory_order_acquire);
    consistent = s.sequence.load(std::memory_order_relaxed) == before;
  }
  if (!consistent) {
    RankPosition unread;
    unread.consistent = false;
    return unread;
  }
  copy.phase[sizeof copy.phase - 1] = copy.call[sizeof copy.call - 1] = '\0';
  RankPosition p;
  p.world_rank = copy.world_rank;
  p.pid = copy.pid;
  p.case_index = copy.case_index;
  p.armed = copy.armed_since_ns != 0;
  p.armed_s = p.armed ? static_cast<double>(monotonic_ns() - copy.armed_since_ns) * 1e-9 : 0.0;
  p.phase = copy.phase;
  p.call = copy.call;
  if (copy.peer >= 0 && !p.call.empty()) p.call += cat(" ", copy.peer);
  p.in_call = copy.in_call > 0;
  p.calls = copy.calls;
  p.sequence = before;
  return p;
}

std::vector<RankPosition> Heartbeat::read() const {
  std::vector<RankPosition> all;
  for (int i = 0; i < slots_; ++i) all.push_back(read(i));
  return all;
}

void Heartbeat::install(Heartbeat* heartbeat) { g_installed.store(heartbeat); }
Heartbeat* Heartbeat::installed() { return g_installed.load(std::memory_order_relaxed); }

void heartbeat_begin(int case_index, const char* phase) {
  if (Heartbeat* h = Heartbeat::installed()) h->begin(case_index, phase);
}
void heartbeat_end() {
  if (Heartbeat* h = Heartbeat::installed()) h->end();
}
void heartbeat_phase(const char* phase) {
  if (Heartbeat* h = Heartbeat::installed()) h->set_phase(phase);
}

CommCallScope::CommCallScope(const char* call, int peer) {
  if (Heartbeat* h = Heartbeat::installed()) h->enter_call(call, peer);
}
CommCallScope::~CommCallScope() {
  if (Heartbeat* h = Heartbeat::installed()) h->exit_call();
}

char process_state(int pid) {
  // /proc/PID/stat: "pid (comm) state ..."; comm may hold spaces and parentheses.
  std::ifstream in(cat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return '?';
  return text[close + 2];
}

}  // namespace sextant
