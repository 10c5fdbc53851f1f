#include "harness/memory_use.h"

#include <gtest/gtest.h>

#include <utility>

#include "harness/error.h"
#include "harness/tensor.h"

namespace sextant {
namespace {

// Counts relative to what was in use before (other tests may hold tensors).
int64_t in_use(MemoryKind k) { return memory_in_use(Device::host)[k]; }

TEST(MemoryUse, ScopesCountTensorsByKindUntilTheyAreFreed) {
  const MemoryUse before = memory_in_use(Device::host);
  Tensor untracked = Tensor::empty({100}, DType::f32);  // outside every scope
  EXPECT_EQ(memory_in_use(Device::host).total(), before.total());
  {
    MemoryScope weights(MemoryKind::weights);
    Tensor w = Tensor::zeros({10, 10}, DType::f32);  // 400 bytes
    {
      MemoryScope grads(MemoryKind::gradients);  // the innermost scope wins
      Tensor g = Tensor::zeros({10}, DType::bf16);
      EXPECT_EQ(in_use(MemoryKind::gradients), before[MemoryKind::gradients] + 20);
    }
    EXPECT_EQ(in_use(MemoryKind::gradients), before[MemoryKind::gradients]);
    Tensor w2 = Tensor::empty({25}, DType::f32);  // the outer scope again
    EXPECT_EQ(in_use(MemoryKind::weights), before[MemoryKind::weights] + 500);
    Tensor alias = w.reshape({100});  // shared storage counts once
    EXPECT_EQ(in_use(MemoryKind::weights), before[MemoryKind::weights] + 500);
  }
  EXPECT_EQ(memory_in_use(Device::host).total(), before.total());
}

TEST(MemoryUse, ThePeakKeepsEachKindAtTheMomentTheTotalWasHighest) {
  reset_memory_peak(Device::host);
  const MemoryUse before = memory_in_use(Device::host);
  {
    MemoryScope a(MemoryKind::activations);
    Tensor x = Tensor::empty({1000}, DType::f32);  // 4000: the peak, all activations
  }
  {
    MemoryScope w(MemoryKind::workspace);
    Tensor y = Tensor::empty({500}, DType::f32);  // 2000: lower, not the peak
  }
  const MemoryUse peak = memory_peak(Device::host);
  EXPECT_EQ(peak.total(), before.total() + 4000);
  EXPECT_EQ(peak[MemoryKind::activations], before[MemoryKind::activations] + 4000);
  EXPECT_EQ(peak[MemoryKind::workspace], before[MemoryKind::workspace]);
  reset_memory_peak(Device::host);
  EXPECT_EQ(memory_peak(Device::host).total(), before.total());
}

TEST(MemoryUse, NothingIsCountedWhileCountingIsOff) {
  const MemoryUse before = memory_in_use(Device::host);
  Tensor kept;
  {
    MemoryNotCounted off;
    MemoryScope weights(MemoryKind::weights);  // a scope inside does not count either
    kept = Tensor::zeros({64}, DType::f32);
    EXPECT_EQ(memory_in_use(Device::host).total(), before.total());
  }
  kept = Tensor();  // its release is not subtracted either
  EXPECT_EQ(memory_in_use(Device::host).total(), before.total());
  MemoryScope weights(MemoryKind::weights);
  Tensor counted = Tensor::zeros({64}, DType::f32);  // counting is back on
  EXPECT_EQ(in_use(MemoryKind::weights), before[MemoryKind::weights] + 256);
}

TEST(MemoryUse, AChargeCountsMemoryOutsideTensorsUntilItGoes) {
  const MemoryUse before = memory_in_use(Device::host);
  MemoryCharge charge;
  {
    MemoryScope comm(MemoryKind::communication);
    charge = MemoryCharge(Device::host, 1000);
  }
  EXPECT_EQ(in_use(MemoryKind::communication), before[MemoryKind::communication] + 1000);
  MemoryCharge moved = std::move(charge);  // counted once
  EXPECT_EQ(in_use(MemoryKind::communication), before[MemoryKind::communication] + 1000);
  {
    MemoryScope comm(MemoryKind::communication);
    moved = MemoryCharge(Device::host, 300);  // replaced: the old one is released
  }
  EXPECT_EQ(in_use(MemoryKind::communication), before[MemoryKind::communication] + 300);
  moved = MemoryCharge();
  EXPECT_EQ(memory_in_use(Device::host).total(), before.total());
}

TEST(MemoryUse, KindsHaveNames) {
  EXPECT_STREQ(memory_kind_name(MemoryKind::optimizer), "optimizer");
  EXPECT_EQ(memory_kind_at(4), MemoryKind::communication);
  EXPECT_THROW(memory_kind_at(kMemoryKinds), RuntimeError);
}

}  // namespace
}  // namespace sextant
