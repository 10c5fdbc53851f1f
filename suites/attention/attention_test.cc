// The attention suite through the same registry the CLI uses: every variant
// passes at every rank count (ci sizes), the traffic formula matches the
// measured counters, zigzag balances the causal work, and every planted
// fault fails its case; the same for packed sequences (THD) and for
// attention/dynamic_cp. Tests never assert on time.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "harness/error.h"
#include "harness/runner.h"
#include "harness/strings.h"
#include "harness/testing/gpu.h"
#include "harness/testing/suite_run.h"
#include "kernels/attention/cp_attention.h"
#include "kernels/attention/cp_variants.h"

namespace sextant {
namespace {

using namespace testing;  // world(), ci_options(), run_suite(): harness/testing/suite_run.h

// The four CP variants (attention/dynamic_cp has tests of its own below).
const std::vector<std::string> kVariants = {"attention/p2p", "attention/a2a", "attention/allgather",
                                            "attention/a2a+p2p"};

// Packed sequences at --seq 64: no padding up to cp 4.
RunOptions packed_options(std::vector<std::string> selection) {
  RunOptions o = ci_options(std::move(selection));
  o.options["seq"] = 64;
  o.options["seq_lens"] = "40,8,16";
  return o;
}

// Failed checks: tensors off their bounds, and exact checks with wrong
// elements (padding rows that must stay zero).
int failed_tensors(const CaseRecord& r) {
  int n = 0;
  for (const TensorCheck& t : r.conformance.tensors) n += t.pass ? 0 : 1;
  return n + (r.conformance.wrong > 0 ? 1 : 0);
}

TEST(Attention, EveryVariantPassesAtEveryRankCount) {
  std::vector<CaseRecord> records = run_suite("attention", ci_options(kVariants));
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  int zigzag_checked = 0;
  std::set<std::string> mla;  // the variants that ran MLA's head dims
  for (const CaseRecord& r : records) {
    const std::string id = r.config.id();
    // MLA's rows: v and the output narrower than q and k (3/2 of it), their traffic in the formula below.
    if (r.config.params.value("v_head_dim", r.config.i("head_dim")) != r.config.i("head_dim")) {
      EXPECT_EQ(r.config.i("head_dim") * 2, r.config.i("v_head_dim") * 3) << id;
      mla.insert(r.config.name);
    }
    EXPECT_EQ(r.conformance.status, "pass") << id << " " << r.error;
    EXPECT_EQ(r.conformance.tensors.size(), 5u) << id;  // out, lse, dq, dk, dv
    for (const char* m : {"tflops_per_rank", "tflops_per_rank_fwd", "load_balance", "compute_time_max_s",
                          "compute_time_min_s", "overlap_efficiency"})
      EXPECT_GT(metric(r, m), 0.0) << id << " " << m;
    // 0 only where a rank holds padding alone (the padding after the last sequence, cut contiguously).
    const bool idle_rank = r.config.params.contains("tail_padding") && r.config.params["layout"] == "contiguous";
    if (!idle_rank) {
      EXPECT_GT(metric(r, "work_balance"), 0.0) << id;
    }
    // The variant's traffic formula is what the counters measured.
    EXPECT_DOUBLE_EQ(metric(r, "bytes_sent_formula"), metric(r, "bytes_sent_per_rank")) << id;
    EXPECT_DOUBLE_EQ(metric(r, "bytes_sent_formula_fwd_bwd"), metric(r, "bytes_sent_per_rank_fwd_bwd")) << id;
    EXPECT_EQ(metric(r, "bytes_sent_per_rank_compute_only"), 0.0) << id;
    // Causal work per rank (score entries computed, not time): zigzag is
    // exactly balanced where no sequence is padded; a contiguous ring over one
    // sequence is not. A sliding window changes both (measured in the test below).
    if (r.config.params["causal"] == true && r.config.parallel.cp >= 2 && !r.config.params.contains("window")) {
      if (r.config.params["layout"] == "zigzag" && r.config.params.value("padding_rows", 0) == 0) {
        EXPECT_EQ(metric(r, "work_balance"), 1.0) << id;
        ++zigzag_checked;
      } else if (r.config.name == "p2p" && !r.config.params.contains("seq_lens")) {
        EXPECT_GT(metric(r, "work_balance"), 1.5) << id;
      }
    }
  }
  EXPECT_EQ(mla.size(), kVariants.size());
  if (world().size() >= 2) {
    EXPECT_GT(zigzag_checked, 0);
  }
}

// A causal sliding window of 8 over 64 rows: every variant passes, and the
// ring skips the steps whose block lies wholly before every query's window,
// beyond the later blocks that causality alone hides (at cp 4: 9 of 16
// steps per pass, not 6). Zigzag's balance is measured, not assumed: a
// window breaks its pairing of an early chunk with a late one. Without a
// causal mask a window of (8, 4) keys skips the blocks beyond both sides:
// every rank computes its own block and its neighbours' only.
TEST(Attention, SlidingWindowPassesEveryVariantAndSkipsRingSteps) {
  RunOptions o = ci_options(kVariants);
  o.rank_counts = {world().size()};
  o.dtypes = {DType::f32};
  std::vector<CaseRecord> records = run_suite("attention", o);
  if (world().rank() != 0) return;
  std::map<std::string, double> skipped;     // by "window layout tp", p2p only
  std::map<bool, double> two_sided_skipped;  // without a causal mask, by windowed: p2p, MHA, tp 1
  int windowed = 0;
  for (const CaseRecord& r : records) {
    const std::string id = r.config.id();
    EXPECT_EQ(r.conformance.status, "pass") << id << " " << r.error;
    const bool mha = r.config.params["kv_heads"] == r.config.params["heads"];
    if (r.config.params["causal"] != true && r.config.name == "p2p" && mha && r.config.parallel.tp == 1 &&
        !r.config.params.contains("v_head_dim")) {
      if (r.config.params.contains("window")) {
        EXPECT_EQ(r.config.params["window"], 8) << id;
        EXPECT_EQ(r.config.params["window_right"], 4) << id;
      }
      two_sided_skipped[r.config.params.contains("window")] = metric(r, "ring_steps_skipped");
    }
    if (r.config.params["causal"] != true || r.config.params.contains("seq_lens")) continue;
    const bool window = r.config.params.contains("window");
    windowed += window ? 1 : 0;
    if (window) {
      EXPECT_EQ(r.config.params["window"], 8) << id;
      EXPECT_GT(metric(r, "work_balance"), 0.0) << id;
    }
    if (r.config.name == "p2p" && mha)
      skipped[cat(window, " ", r.config.params["layout"].get<std::string>(), " ", r.config.parallel.tp)] =
          metric(r, "ring_steps_skipped");
  }
  EXPECT_GT(windowed, 0);
  const int cp = world().size();
  if (cp == 4) {  // contiguous blocks of 16 rows: rank r skips 3 - r later blocks, and max(0, r - 1) earlier ones
    EXPECT_EQ(skipped.at("1 contiguous 1"), 2 * 9.0);
    EXPECT_EQ(skipped.at("0 contiguous 1"), 2 * 6.0);
  }
  if (cp >= 4) {
    EXPECT_GT(skipped.at("1 contiguous 1"), skipped.at("0 contiguous 1"));
  }
  // Per pass: cp^2 steps, of which the end ranks compute 2 and the others 3 (cp 2: all 4).
  EXPECT_EQ(two_sided_skipped.at(false), 0.0);
  EXPECT_EQ(two_sided_skipped.at(true), cp >= 4 ? 2.0 * (cp * cp - (3 * cp - 2)) : 0.0);
}

// Packed sequences (40, 8, 16 in one row of 64): every variant passes, the
// metrics count real tokens, and per-sequence zigzag balances the causal
// work exactly where no sequence needs padding, where zigzagging the packed
// stream as one sequence does not.
TEST(Attention, PackedSequencesPassEveryVariant) {
  std::vector<CaseRecord> records = run_suite("attention", packed_options(kVariants));
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  int balanced = 0;
  for (const CaseRecord& r : records) {
    const std::string id = r.config.id();
    EXPECT_EQ(r.conformance.status, "pass") << id << " " << r.error;
    EXPECT_EQ(r.conformance.tensors.size(), 5u) << id;
    EXPECT_EQ(r.config.params.at("causal"), true) << id;
    EXPECT_EQ(r.config.params.at("seq_lens"), nlohmann::json({40, 8, 16})) << id;
    EXPECT_DOUBLE_EQ(metric(r, "bytes_sent_formula_fwd_bwd"), metric(r, "bytes_sent_per_rank_fwd_bwd")) << id;
    const int cp = r.config.parallel.cp;
    EXPECT_EQ(r.config.params.at("padding_rows").get<int64_t>(), cp <= 4 ? 0 : 16) << id;  // 48 + 16 + 16 at cp 8
    if (cp >= 2 && cp <= 4) {
      EXPECT_EQ(metric(r, "work_balance_zigzag_per_sequence"), 1.0) << id;
      EXPECT_GT(metric(r, "work_balance_zigzag_stream"), 1.5) << id;
      EXPECT_GT(metric(r, "work_balance_contiguous"), 1.0) << id;
      // A sliding window breaks zigzag's pairing of an early chunk with a late one.
      if (r.config.params["layout"] == "zigzag" && r.config.name != "a2a" && !r.config.params.contains("window")) {
        EXPECT_EQ(metric(r, "work_balance"), 1.0) << id;
        ++balanced;
      }
    }
  }
  if (world().size() >= 2) {
    EXPECT_GT(balanced, 0);
  }
}

// zipf lengths with padding, and without: a length that does not split is refused.
TEST(Attention, ZipfLengthsWithPaddingPass) {
  RunOptions o = ci_options({"attention/p2p", "attention/allgather"});
  o.rank_counts = {world().size()};
  o.dtypes = {DType::f32};
  o.options["seq_lens"] = "zipf:5";
  std::vector<CaseRecord> records = run_suite("attention", o);
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.conformance.status, "pass") << r.config.id() << " " << r.error;
    EXPECT_EQ(r.config.params.at("seq_lens").size(), 5u);
    if (r.config.parallel.cp >= 2) {
      EXPECT_GT(metric(r, "padding_rows"), 0.0) << r.config.id();
    }
  }
}

// The ring's isend/irecv under NCCL's point-to-point rules (no tags, one stream).
TEST(Attention, RingPassesUnderNcclRules) {
  std::vector<CaseRecord> records =
      run_suite_under_nccl_rules("attention", ci_options({"attention/p2p", "attention/dynamic_cp"}));
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
  RunOptions packed = packed_options({"attention/p2p", "attention/a2a+p2p"});  // sampled tokens of their sequences
  packed.rank_counts = o.rank_counts, packed.dtypes = o.dtypes, packed.options["reference"] = "spot";
  for (CaseRecord& r : run_suite("attention", packed)) records.push_back(std::move(r));
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.conformance.status, "pass") << r.config.id() << " " << r.error;
    EXPECT_EQ(r.conformance.tensors.size(), 3u) << r.config.id();  // out, lse, dq on the sampled rows
    EXPECT_NE(r.conformance.notes.at("reference").get<std::string>().find("spot"), std::string::npos);
  }
}

// Whether a fault shows only on packed sequences (its table row says so).
bool needs_packing(const std::string& fault) {
  const cp::Fault f = cp::faults().parse(fault);
  return !cp::faults().shows(f, cp::fault_site(cp::variant_info(cp::Variant::a2a_p2p), 2, true, cp::Layout::zigzag, 0,
                                               ops::Window::causal(1), true));
}

// Each fault must fail every case that plants it (a fault in the ring is
// invisible at one rank); the faults of packed sequences on packed inputs.
TEST(Attention, EveryPlantedFaultIsCaught) {
  if (world().size() < 2) GTEST_SKIP() << "faults need two ranks";
  Registry r = suite_registry("attention");
  for (const std::string& fault : cp::faults().names()) {
    // The ci sweep replicates KV heads from 4 ranks on (8:1 GQA over an a2a group of 4).
    if (cp::faults().parse(fault) == cp::Fault::kv_replica_first_only && world().size() < 4) continue;
    RunOptions o = needs_packing(fault) ? packed_options(kVariants) : ci_options(kVariants);
    o.rank_counts = {world().size()};
    o.fault = fault;
    // 40, 8, 16 split into 2 cp chunks without padding up to cp 4: the padding fault needs some.
    if (cp::faults().parse(fault) == cp::Fault::padding_rows_attend) o.options["tail_padding"] = 1;
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

// A scale error of 1e-3 in the ring's dK/dV is under bf16's rounding: the
// norm bound lets it pass, the systematic check (tolerance.h
// SystematicRule) catches it in bf16 and f16; in f32 a tenth of it fails.
TEST(Attention, ScaleErrorBelowTheRoundingIsCaughtBySystematicCheck) {
  if (world().size() < 2) GTEST_SKIP() << "the ring needs two ranks";
  for (const auto& [dtype, magnitude] : {std::pair{DType::bf16, 1e-3}, {DType::f16, 1e-3}, {DType::f32, 1e-4}}) {
    RunOptions o = ci_options({"attention/p2p", "attention/a2a+p2p"});
    o.rank_counts = {world().size()};
    o.dtypes = {dtype};
    o.options["kv_heads"] = 16;  // MHA: dK and dV of 16k elements, a standard error far under 1e-3
    o.fault = "dkv_scale";
    o.fault_magnitude = magnitude;
    std::vector<CaseRecord> records = run_suite("attention", o);
    if (world().rank() != 0) continue;
    ASSERT_FALSE(records.empty()) << dtype_name(dtype);
    int below_the_norm = 0;
    for (const CaseRecord& rec : records) {
      EXPECT_EQ(rec.conformance.status, "fail")
          << "dkv_scale " << magnitude << " was not caught by " << rec.config.id();
      EXPECT_EQ(rec.config.fault_magnitude, magnitude);
      for (const TensorCheck& t : rec.conformance.tensors) {
        if (t.name != "dk" && t.name != "dv") continue;
        EXPECT_FALSE(t.pass) << t.name << " " << rec.config.id();
        EXPECT_EQ(t.failed_side(), "distributed") << t.name << " " << rec.config.id();
        EXPECT_NEAR(t.systematic.scale, magnitude, magnitude / 4) << t.name << " " << rec.config.id();
        below_the_norm += t.error <= t.bound;
      }
    }
    // bf16: the norm bound alone passes every one of them.
    if (dtype == DType::bf16) {
      EXPECT_EQ(below_the_norm, 2 * static_cast<int>(records.size()));
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
  RunOptions o = ci_options(kVariants);
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

// Packed sequences in every variant, and dynamic CP, on the CUDA kernels.
TEST(Attention, PackedSequencesAndDynamicCpPassOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  std::vector<std::string> selection = kVariants;
  selection.push_back("attention/dynamic_cp");
  RunOptions o = packed_options(selection);
  o.rank_counts = {world().size()};
  const std::vector<CaseRecord> records = run_suite_on_gpu("attention", o);
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.device, Device::cuda) << r.config.id();
    EXPECT_EQ(r.conformance.status, "pass")
        << r.config.id() << " " << r.error << " " << nlohmann::json(r.conformance.failures).dump();
  }
}

TEST(Attention, EveryPlantedFaultIsCaughtOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  if (world().size() < 2) GTEST_SKIP() << "faults need two ranks";
  for (const std::string& fault : cp::faults().names()) {
    // The ci sweep replicates KV heads from 4 ranks on (8:1 GQA over an a2a group of 4).
    if (cp::faults().parse(fault) == cp::Fault::kv_replica_first_only && world().size() < 4) continue;
    RunOptions o = needs_packing(fault) ? packed_options(kVariants) : ci_options(kVariants);
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
    c.params = {
        {"variant", name},    {"layout", "contiguous"}, {"causal", true}, {"seq", 64},     {"batch", 1},
        {"heads", 8},         {"kv_heads", 8},          {"head_dim", 8},  {"a2a_size", 1}, {"p2p_size", parallel.cp},
        {"reference", "full"}};
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
  EXPECT_EQ(validate("p2p", {{"v_head_dim", 0}}, cp8), "--set v_head_dim 0 must be positive");
  EXPECT_EQ(validate("allgather", {{"v_head_dim", 5}, {"head_dim", 12}}, cp8), "accepted");          // MLA
  EXPECT_EQ(validate("a2a", {{"kv_heads", 4}, {"a2a_size", 8}, {"p2p_size", 1}}, cp8), "accepted");  // replicated
  EXPECT_EQ(validate("a2a", {{"heads", 24}, {"kv_heads", 6}, {"a2a_size", 8}, {"p2p_size", 1}}, cp8),
            "a2a size 8 and the 6 KV heads per TP rank (--kv-heads 6 / --tp 1) must divide one another (fewer KV "
            "heads than a2a members are replicated)");
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
    c.params = {
        {"variant", "p2p"},   {"layout", "contiguous"}, {"causal", true},       {"seq", 64},     {"batch", 1},
        {"heads", 8},         {"kv_heads", 8},          {"head_dim", head_dim}, {"a2a_size", 1}, {"p2p_size", 8},
        {"reference", "full"}};
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

  // Packed sequences.
  auto packed = [&](nlohmann::json changes, ParallelConfig parallel) {
    nlohmann::json c = {{"seq_lens", {40, 8, 16}}, {"thd_padding", true}};
    if (changes.is_object()) c.update(changes);
    return validate("p2p", c, parallel);
  };
  const ParallelConfig cp4{1, 4, 1, 1};
  EXPECT_EQ(packed({}, cp4), "accepted");
  EXPECT_EQ(packed({{"seq_lens", {40, 8}}}, cp4), "--set seq_lens: the lengths sum to 48, not --seq 64");
  EXPECT_EQ(packed({{"seq_lens", {64, 0}}}, cp4), "accepted");  // a sequence of no tokens
  EXPECT_EQ(packed({{"seq_lens", {70, -6}}}, cp4), "--set seq_lens: length -6 must not be negative");
  EXPECT_EQ(packed({{"layout", "zigzag"}, {"thd_padding", false}, {"tail_padding", 4}}, cp4),
            "--set thd_padding=false: tail_padding 4 must be divisible by 2*cp = 8");
  EXPECT_EQ(packed({{"causal", false}}, cp4),
            "--set seq_lens: packed sequences attend causally; --set causal=false does not apply");
  EXPECT_EQ(packed({{"layout", "zigzag"}, {"thd_padding", false}}, cp4), "accepted");  // 40, 8, 16 split by 8
  EXPECT_EQ(packed({{"layout", "zigzag"}, {"thd_padding", false}, {"seq_lens", {20, 28, 16}}}, cp4),
            "--set thd_padding=false: sequence length 20 must be divisible by 2*cp = 8 (each sequence is zigzagged "
            "on its own)");
}

// attention/dynamic_cp: both groupings pass against the reference on a
// long-tailed batch and on full-length sequences; the dynamic schedule puts
// short sequences on groups of one; the speedup and busy fractions are recorded.
TEST(Attention, DynamicCpPassesAndRecordsTheSpeedup) {
  RunOptions o = ci_options({"attention/dynamic_cp"});
  o.rank_counts = {world().size()};
  std::vector<CaseRecord> records = run_suite("attention", o);
  if (world().rank() != 0) return;
  // zipf:8, zipf:8 with MLA's head dims, zipf:8 with a window of 16, 128 (full length), and 1,0,79,16,32 (a
  // sequence of one token and one of none)
  ASSERT_EQ(records.size(), 5u);
  for (const CaseRecord& r : records) {
    const std::string id = r.config.id();
    EXPECT_EQ(r.conformance.status, "pass") << id << " " << r.error;
    EXPECT_EQ(r.conformance.tensors.size(), 10u) << id;  // static and dynamic: out, lse, dq, dk, dv
    for (const char* m : {"speedup_vs_static", "speedup_vs_static_model", "busy_fraction_static",
                          "busy_fraction_dynamic", "tflops_per_rank", "load_balance"})
      EXPECT_GT(metric(r, m), 0.0) << id << " " << m;
    const nlohmann::json bins = r.metrics.at("bins_per_group_dynamic");
    if (r.config.params.at("seq_lens_spec") == "128") {
      EXPECT_EQ(metric(r, "speedup_vs_static_model"), 1.0) << id;  // nothing to regroup
      EXPECT_EQ(bins.size(), 1u) << id;
    } else if (world().size() >= 2) {
      EXPECT_TRUE(bins.contains("1")) << id << " short sequences run on one rank";
      EXPECT_LE(metric(r, "padding_rows_dynamic"), metric(r, "padding_rows_static")) << id;
    }
  }
}

TEST(Attention, DynamicCpFaultsAreCaught) {
  if (world().size() < 2) GTEST_SKIP() << "faults need two ranks";
  for (const std::string& fault : suite_registry("attention").select({"attention/dynamic_cp"}).at(0)->fault_names()) {
    RunOptions o = ci_options({"attention/dynamic_cp"});
    o.rank_counts = {world().size()};
    o.fault = fault;
    o.options["seq_lens"] = "zipf:8";
    std::vector<CaseRecord> records = run_suite("attention", o);
    if (world().rank() != 0) continue;
    ASSERT_FALSE(records.empty()) << fault;
    for (const CaseRecord& rec : records) {
      EXPECT_EQ(rec.conformance.status, "fail") << fault << " was not caught by " << rec.config.id();
      EXPECT_EQ(rec.error, "") << rec.config.id();
      EXPECT_GT(failed_tensors(rec), 0) << fault << " " << rec.config.id();
    }
  }
}

}  // namespace
}  // namespace sextant
