// The ops suite at the ci sizes: every op passes its gate, and every kernel
// fault the suite lists makes some op fail on the baseline side (the op
// itself is wrong: only the gate can see it).
#include <gtest/gtest.h>

#include "harness/testing/gpu.h"
#include "harness/testing/suite_run.h"

namespace sextant {
namespace {

using testing::ci_options;
using testing::run_suite;
using testing::world;

TEST(OpsSuite, EveryOpPassesAtEveryShape) {
  const std::vector<CaseRecord> records = run_suite("ops", ci_options({"ops"}));
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.conformance.status, "pass")
        << r.config.id() << " " << r.error << " " << (r.conformance.failures.empty() ? "" : r.conformance.failures[0]);
    for (const TensorCheck& t : r.conformance.tensors) EXPECT_TRUE(t.base_pass) << r.config.id() << " " << t.name;
  }
}

// (A fault in code checked beside the baseline, in_baseline false, fails on the distributed side.)
TEST(OpsSuite, EveryKernelFaultFailsItsOpOnTheBaselineSide) {
  const Registry registry = testing::suite_registry("ops");
  std::set<KernelFault> faults;
  for (const CaseDef& c : registry.cases()) faults.insert(c.kernel_faults.begin(), c.kernel_faults.end());
  ASSERT_FALSE(faults.empty());
  for (KernelFault fault : faults) {
    RunOptions o = ci_options({"ops"});
    o.fault = kernel_fault_info(fault).name;
    const std::vector<CaseRecord> records = run_suite("ops", o);
    if (world().rank() != 0) continue;
    int failed = 0;
    for (const CaseRecord& r : records)
      for (const TensorCheck& t : r.conformance.tensors)
        failed += kernel_fault_info(fault).in_baseline ? !t.base_pass : !t.pass && t.base_pass;
    EXPECT_GT(failed, 0) << o.fault << " passed every op";
  }
}

// cuBLASLt's FP8 matmul under delayed, current and block scaling, the casts on the host:
// the same three checks, and the gemm's planted fault fails them.
TEST(OpsSuite, Fp8GemmPassesAndItsFaultFailsOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  RunOptions o = ci_options({"ops/gemm_fp8"});
  const std::vector<CaseRecord> records = testing::run_suite_on_gpu("ops", o);
  o.fault = "fp8_scale_inverse_twice";
  const std::vector<CaseRecord> faulty = testing::run_suite_on_gpu("ops", o);
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.device, Device::cuda) << r.config.id();
    EXPECT_EQ(r.conformance.status, "pass")
        << r.config.id() << " " << r.error << " " << (r.conformance.failures.empty() ? "" : r.conformance.failures[0]);
  }
  ASSERT_FALSE(faulty.empty());
  for (const CaseRecord& r : faulty) EXPECT_EQ(r.conformance.status, "fail") << r.config.id();
}

}  // namespace
}  // namespace sextant
