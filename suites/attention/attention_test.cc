// The attention suite through the same registry the CLI uses: every variant
// passes at every rank count (ci sizes), the traffic formula matches the
// measured counters, zigzag balances the causal work, and every planted
// fault fails its case. Tests never assert on time.
#include <gtest/gtest.h>

#include "harness/error.h"
#include "harness/runner.h"
#include "harness/testing/gpu.h"
#include "harness/testing/suite_run.h"
#include "kernels/attention/cp_attention.h"

namespace sextant {
namespace {

using namespace testing;  // world(), ci_options(), run_suite(): harness/testing/suite_run.h

int failed_tensors(const CaseRecord& r) {
  int n = 0;
  for (const TensorCheck& t : r.conformance.tensors) n += t.pass ? 0 : 1;
  return n;
}

TEST(Attention, EveryVariantPassesAtEveryRankCount) {
  std::vector<CaseRecord> records = run_suite("attention", ci_options({"attention"}));
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  int zigzag_checked = 0;
  for (const CaseRecord& r : records) {
    const std::string id = r.config.id();
    EXPECT_EQ(r.conformance.status, "pass") << id << " " << r.error;
    EXPECT_EQ(r.conformance.tensors.size(), 5u) << id;  // out, lse, dq, dk, dv
    for (const char* m : {"tflops_per_rank", "tflops_per_rank_fwd", "load_balance", "compute_time_max_s",
                          "compute_time_min_s", "overlap_efficiency", "work_balance"})
      EXPECT_GT(metric(r, m), 0.0) << id << " " << m;
    // The variant's traffic formula is what the counters measured.
    EXPECT_DOUBLE_EQ(metric(r, "bytes_sent_formula"), metric(r, "bytes_sent_per_rank")) << id;
    EXPECT_DOUBLE_EQ(metric(r, "bytes_sent_formula_fwd_bwd"), metric(r, "bytes_sent_per_rank_fwd_bwd")) << id;
    EXPECT_EQ(metric(r, "bytes_sent_per_rank_compute_only"), 0.0) << id;
    // Causal work per rank (score entries computed, not time): zigzag is
    // exactly balanced; a contiguous ring is not.
    if (r.config.params["causal"] == true && r.config.parallel.cp >= 2) {
      if (r.config.params["layout"] == "zigzag") {
        EXPECT_EQ(metric(r, "work_balance"), 1.0) << id;
        ++zigzag_checked;
      } else if (r.config.name == "p2p") {
        EXPECT_GT(metric(r, "work_balance"), 1.5) << id;
      }
    }
  }
  if (world().size() >= 2) {
    EXPECT_GT(zigzag_checked, 0);
  }
}

// The ring's isend/irecv under NCCL's point-to-point rules (no tags, one stream).
TEST(Attention, RingPassesUnderNcclRules) {
  std::vector<CaseRecord> records = run_suite_under_nccl_rules("attention", ci_options({"attention/p2p"}));
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) EXPECT_EQ(r.conformance.status, "pass") << r.config.id() << " " << r.error;
}

TEST(Attention, SpotCheckOnSampledRowsPasses) {
  RunOptions o = ci_options({"attention/p2p", "attention/a2a+p2p"});
  o.rank_counts = {world().size()};
  o.dtypes = {DType::f32};
  o.options["reference"] = "spot";
  o.options["causal"] = true;
  std::vector<CaseRecord> records = run_suite("attention", o);
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.conformance.status, "pass") << r.config.id() << " " << r.error;
    EXPECT_EQ(r.conformance.tensors.size(), 3u) << r.config.id();  // out, lse, dq on the sampled rows
    EXPECT_NE(r.conformance.notes.at("reference").get<std::string>().find("spot"), std::string::npos);
  }
}

// Each fault must fail every case that plants it (a fault in the ring is
// invisible at one rank).
TEST(Attention, EveryPlantedFaultIsCaught) {
  if (world().size() < 2) GTEST_SKIP() << "faults need two ranks";
  Registry r = suite_registry("attention");
  for (const std::string& fault : cp::Faults::names()) {
    RunOptions o = ci_options({"attention"});
    o.rank_counts = {world().size()};
    o.fault = fault;
    std::vector<CaseRecord> records = run_suite("attention", o);
    if (world().rank() != 0) continue;
    ASSERT_FALSE(records.empty()) << fault;
    for (const CaseRecord& rec : records) {
      EXPECT_EQ(rec.conformance.status, "fail") << fault << " was not caught by " << rec.config.id();
      // Caught by the numbers, not by a crash.
      EXPECT_EQ(rec.error, "") << rec.config.id();
      EXPECT_GT(failed_tensors(rec), 0) << fault << " " << rec.config.id();
    }
  }
}

// One spot-checked fault too: sampled rows still see a dropped ring step.
TEST(Attention, SpotCheckCatchesASkippedRingStep) {
  if (world().size() < 2) GTEST_SKIP() << "faults need two ranks";
  RunOptions o = ci_options({"attention/p2p"});
  o.rank_counts = {world().size()};
  o.fault = "ring_skip_step";
  o.options["reference"] = "spot";
  std::vector<CaseRecord> records = run_suite("attention", o);
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& rec : records) {
    EXPECT_EQ(rec.conformance.status, "fail") << rec.config.id();
    EXPECT_GT(failed_tensors(rec), 0) << rec.config.id();
  }
}

TEST(Attention, EveryVariantPassesOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  RunOptions o = ci_options({"attention"});
  o.rank_counts = {world().size()};
  const std::vector<CaseRecord> records = run_suite_on_gpu("attention", o);
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.device, Device::cuda) << r.config.id();
    EXPECT_EQ(r.conformance.status, "pass")
        << r.config.id() << " " << r.error << " " << nlohmann::json(r.conformance.failures).dump();
    EXPECT_GT(metric(r, "compute_time_max_s"), 0) << r.config.id();  // timed with CUDA events
  }
}

TEST(Attention, EveryPlantedFaultIsCaughtOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  if (world().size() < 2) GTEST_SKIP() << "faults need two ranks";
  for (const std::string& fault : cp::Faults::names()) {
    RunOptions o = ci_options({"attention"});
    o.rank_counts = {world().size()};
    o.fault = fault;
    const std::vector<CaseRecord> records = run_suite_on_gpu("attention", o);
    if (world().rank() != 0) continue;
    ASSERT_FALSE(records.empty()) << fault;
    for (const CaseRecord& rec : records) {
      EXPECT_EQ(rec.conformance.status, "fail") << fault << " was not caught on the GPU by " << rec.config.id();
      EXPECT_EQ(rec.error, "") << rec.config.id();
    }
  }
}

// Bad input: one line naming the numbers, thrown by validate before anything runs.
TEST(Attention, BadInputIsRejectedWithTheNumbers) {
  Registry r = suite_registry("attention");
  auto validate = [&](const std::string& name, nlohmann::json changes, ParallelConfig parallel) {
    const CaseDef* def = r.select({"attention/" + name}).front();
    CaseConfig c;
    c.suite = "attention", c.name = name, c.parallel = parallel, c.ranks = parallel.world();
    c.params = {{"variant", name}, {"layout", "contiguous"}, {"causal", true},    {"seq", 64},
                {"batch", 1},      {"heads", 8},             {"kv_heads", 8},     {"head_dim", 8},
                {"a2a_size", 1},   {"p2p_size", parallel.cp}, {"reference", "full"}};
    if (changes.is_object()) c.params.update(changes);
    try {
      def->validate(c);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const ParallelConfig cp8{1, 8, 1, 1}, tp2cp4{2, 4, 1, 1};
  EXPECT_EQ(validate("p2p", {{"seq", 100}}, cp8), "--seq 100 must be divisible by cp 8");
  EXPECT_EQ(validate("p2p", {{"seq", 24}, {"layout", "zigzag"}}, cp8),
            "--seq 24 must be divisible by 2*cp = 16 for the zigzag layout");
  EXPECT_EQ(validate("p2p", {{"heads", 6}, {"kv_heads", 6}}, ParallelConfig{4, 2, 1, 1}),
            "--tp 4 must divide --heads 6");
  EXPECT_EQ(validate("p2p", {{"kv_heads", 3}}, cp8), "--kv-heads 3 must divide --heads 8");
  EXPECT_EQ(validate("a2a", {{"kv_heads", 4}, {"a2a_size", 8}, {"p2p_size", 1}}, cp8),
            "a2a size 8 must divide the 4 KV heads per TP rank (--kv-heads 4 / --tp 1)");
  EXPECT_EQ(validate("a2a", {{"heads", 4}, {"kv_heads", 4}, {"a2a_size", 4}, {"p2p_size", 1}}, tp2cp4),
            "a2a size 4 must divide the 2 heads per TP rank (--heads 4 / --tp 2)");
  EXPECT_EQ(validate("a2a+p2p", {{"a2a_size", 2}, {"p2p_size", 3}}, tp2cp4),
            "a2a_size 2 x p2p_size 3 = 6 must equal cp 4");
  EXPECT_EQ(validate("a2a+p2p", {{"a2a_size", 3}, {"p2p_size", 1}}, tp2cp4),
            "a2a_size 3 must divide cp 4 (cp = a2a_size x p2p_size)");
  EXPECT_EQ(validate("p2p", {}, cp8), "accepted");
  // The CUDA kernels hold a row's columns in registers: up to 256 on --device cuda.
  auto on_cuda = [&](int64_t head_dim) {
    const CaseDef* def = r.select({"attention/p2p"}).front();
    CaseConfig c;
    c.suite = "attention", c.name = "p2p", c.parallel = cp8, c.ranks = 8, c.device = Device::cuda;
    c.params = {{"variant", "p2p"}, {"layout", "contiguous"}, {"causal", true},   {"seq", 64},
                {"batch", 1},       {"heads", 8},             {"kv_heads", 8},    {"head_dim", head_dim},
                {"a2a_size", 1},    {"p2p_size", 8},          {"reference", "full"}};
    try {
      def->validate(c);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(on_cuda(512),
            "--head-dim 512 must be at most 256 on --device cuda (the CUDA attention kernels hold a row's columns in "
            "registers)");
  EXPECT_EQ(on_cuda(256), "accepted");
}

}  // namespace
}  // namespace sextant
