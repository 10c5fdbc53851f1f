#include "harness/memory_use.h"

#include <atomic>
#include <mutex>
#include <utility>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {
namespace {

constexpr const char* kKindNames[kMemoryKinds] = {"weights",     "gradients",     "optimizer",
                                                  "activations", "communication", "workspace"};

std::atomic<int> g_open_kind{-1};   // -1: no scope open
std::atomic<int> g_not_counted{0};  // MemoryNotCounted regions open

struct Counts {
  MemoryUse in_use, peak;
};
std::mutex g_mutex;
Counts g_counts[2];  // by Device

Counts& counts_of(Device d) { return g_counts[d == Device::host ? 0 : 1]; }

}  // namespace

const char* memory_kind_name(MemoryKind kind) { return kKindNames[static_cast<int>(kind)]; }

MemoryKind memory_kind_at(int index) {
  if (index < 0 || index >= kMemoryKinds) throw RuntimeError(cat("memory kind index ", index, " out of range"));
  return static_cast<MemoryKind>(index);
}

int64_t MemoryUse::total() const {
  int64_t t = 0;
  for (int64_t b : bytes) t += b;
  return t;
}

MemoryScope::MemoryScope(MemoryKind kind) : previous_(g_open_kind.exchange(static_cast<int>(kind))) {}
MemoryScope::~MemoryScope() { g_open_kind.store(previous_); }

MemoryNotCounted::MemoryNotCounted() { ++g_not_counted; }
MemoryNotCounted::~MemoryNotCounted() { --g_not_counted; }

MemoryCharge::MemoryCharge(Device device, size_t bytes)
    : device_(device), bytes_(bytes), kind_(memory_note_allocation(device, bytes)) {}
MemoryCharge::~MemoryCharge() { memory_note_release(device_, kind_, bytes_); }
MemoryCharge::MemoryCharge(MemoryCharge&& other) noexcept
    : device_(other.device_), bytes_(std::exchange(other.bytes_, 0)), kind_(std::exchange(other.kind_, -1)) {}
MemoryCharge& MemoryCharge::operator=(MemoryCharge&& other) noexcept {
  if (this != &other) {
    memory_note_release(device_, kind_, bytes_);
    device_ = other.device_;
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = std::exchange(other.kind_, -1);
  }
  return *this;
}

MemoryUse memory_in_use(Device device) {
  std::lock_guard lock(g_mutex);
  return counts_of(device).in_use;
}

MemoryUse memory_peak(Device device) {
  std::lock_guard lock(g_mutex);
  return counts_of(device).peak;
}

void reset_memory_peak(Device device) {
  std::lock_guard lock(g_mutex);
  Counts& c = counts_of(device);
  c.peak = c.in_use;
}

int memory_note_allocation(Device device, size_t bytes) {
  const int kind = g_open_kind.load();
  if (kind < 0 || g_not_counted.load() > 0) return -1;
  std::lock_guard lock(g_mutex);
  Counts& c = counts_of(device);
  c.in_use.bytes[static_cast<size_t>(kind)] += static_cast<int64_t>(bytes);
  if (c.in_use.total() > c.peak.total()) c.peak = c.in_use;
  return kind;
}

void memory_note_release(Device device, int kind, size_t bytes) {
  if (kind < 0) return;
  std::lock_guard lock(g_mutex);
  counts_of(device).in_use.bytes[static_cast<size_t>(kind)] -= static_cast<int64_t>(bytes);
}

}  // namespace sextant
