// What sextant's tensors hold, by what the memory is for. Every tensor
// allocated inside a MemoryScope is counted under the scope's kind, on its
// device, until its storage is freed; memory allocated outside any scope
// (the float64 references, the checks, the harness) is not counted. The
// training step opens the scopes (kernels/model), so its peak can be put
// beside the planner's estimate of the same config.
//
//   { MemoryScope scope(MemoryKind::weights); value = Tensor::zeros(...); }
//   reset_memory_peak(Device::host);  ...  memory_peak(Device::host).total()
//
// Counted: Tensor storage (host and device) and what a MemoryCharge names
// (the MoE dispatcher's peer-memory windows). Not counted: library
// workspaces (cuBLAS, cuDNN, NCCL), std::vector bookkeeping.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "harness/device.h"

namespace sextant {

enum class MemoryKind { weights, gradients, optimizer, activations, communication, workspace };
inline constexpr int kMemoryKinds = 6;
const char* memory_kind_name(MemoryKind kind);  // "weights", ..., "workspace"
MemoryKind memory_kind_at(int index);           // by index, 0 .. kMemoryKinds - 1

struct MemoryUse {
  std::array<int64_t, kMemoryKinds> bytes{};
  int64_t& operator[](MemoryKind k) { return bytes[static_cast<size_t>(k)]; }
  int64_t operator[](MemoryKind k) const { return bytes[static_cast<size_t>(k)]; }
  int64_t total() const;
};

// Allocations on any thread of this process, while the scope lives, count as
// `kind`; scopes nest (the innermost wins) and must close in reverse order.
class MemoryScope {
 public:
  explicit MemoryScope(MemoryKind kind);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  int previous_;
};

// Nothing allocated while one lives is counted, whatever scopes open inside
// it: a second model built beside the measured one (the one-rank baseline of
// a check) stays out of the measured step's peak.
class MemoryNotCounted {
 public:
  MemoryNotCounted();
  ~MemoryNotCounted();
  MemoryNotCounted(const MemoryNotCounted&) = delete;
  MemoryNotCounted& operator=(const MemoryNotCounted&) = delete;
};

// Memory held outside a Tensor (a shared-memory window), counted under the
// scope open when it is made, until it is destroyed or replaced.
class MemoryCharge {
 public:
  MemoryCharge() = default;
  MemoryCharge(Device device, size_t bytes);
  ~MemoryCharge();
  MemoryCharge(MemoryCharge&& other) noexcept;
  MemoryCharge& operator=(MemoryCharge&& other) noexcept;

 private:
  Device device_ = Device::host;
  size_t bytes_ = 0;
  int kind_ = -1;
};

MemoryUse memory_in_use(Device device);
// The counts at the moment the total was highest since the last reset.
MemoryUse memory_peak(Device device);
void reset_memory_peak(Device device);  // the peak becomes what is in use now

// For Tensor's storage: count an allocation under the open scope's kind
// (returns it, or -1 outside every scope) and its release.
int memory_note_allocation(Device device, size_t bytes);
void memory_note_release(Device device, int kind, size_t bytes);

}  // namespace sextant
