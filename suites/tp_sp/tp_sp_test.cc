// The tp_sp suite through the same registry the CLI uses: every block passes
// at every tp (times dp) with SP off and on, SP moves the all-reduce path's
// bytes and cuts the LayerNorm activations TP-fold, every planted fault
// fails its case, and bad input is refused before anything runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "harness/error.h"
#include "harness/runner.h"
#include "harness/testing/gpu.h"
#include "harness/testing/suite_run.h"

namespace sextant {
namespace {

using namespace testing;  // world(), ci_options(), run_suite(): harness/testing/suite_run.h

// The default sweep at every rank count up to the world, run once (collectively) and shared.
const std::vector<CaseRecord>& sweep_records() {
  static const std::vector<CaseRecord> records = run_suite("tp_sp", ci_options({"tp_sp"}));
  return records;
}

bool sp_of(const CaseRecord& r) { return r.config.parallel.sp; }
bool regather_of(const CaseRecord& r) { return r.config.params.value("regather", false); }
// The block and, for FP8 linears, the recipe: "mlp", "mlp fp8 current".
std::string block_of(const CaseRecord& r) {
  const std::string recipe = r.config.params.value("fp8_recipe", std::string());
  return recipe.empty() ? r.config.name : r.config.name + " fp8 " + recipe;
}

TEST(TpSp, EveryBlockPassesAtEveryTpWithSpOnAndOff) {
  const std::vector<CaseRecord>& records = sweep_records();
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  std::set<std::tuple<std::string, int, int, bool, std::string>> seen;  // block, tp, dp, sp, dtype
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.conformance.status, "pass")
        << r.config.id() << " " << r.error << " " << nlohmann::json(r.conformance.failures).dump();
    EXPECT_GE(r.conformance.tensors.size(), 4u) << r.config.id();
    for (const char* m : {"tflops_per_rank", "activation_bytes_per_rank", "bytes_sent_per_rank"})
      EXPECT_TRUE(r.metrics.contains(m)) << r.config.id() << " lacks " << m;
    if (r.config.name != "vocab") {
      EXPECT_TRUE(r.metrics.contains("layernorm_activation_bytes_per_rank")) << r.config.id();
    }
    seen.insert({block_of(r), r.config.parallel.tp, r.config.parallel.dp, sp_of(r), dtype_name(r.config.dtype)});
  }
  for (const char* block : {"mlp", "attn_proj", "vocab"})
    for (const char* dtype : {"f32", "bf16"}) {
      EXPECT_TRUE(seen.count({block, 1, 1, false, dtype})) << block << " " << dtype;
      for (int tp : {2, 4}) {  // each at its own rank count (1, 2, 4 ... up to the world)
        if (tp > world().size()) continue;
        for (bool sp : {false, true}) {
          EXPECT_TRUE(seen.count({block, tp, 1, sp, dtype})) << block << " tp" << tp << " sp" << sp << " " << dtype;
        }
      }
      if (world().size() == 4) {  // TP inside DP: tp 2 x dp 2
        EXPECT_TRUE(seen.count({block, 2, 2, true, dtype})) << block << " tp2 dp2 " << dtype;
      }
    }
  for (const char* name : {"mlp", "attn_proj"})  // FP8 linears, bf16 activations
    for (const char* recipe : {"delayed", "current", "block", "mxfp8"})
      for (int tp : {1, 2, 4})
        if (tp <= world().size()) {
          const std::string block = std::string(name) + " fp8 " + recipe;
          EXPECT_TRUE(seen.count({block, tp, 1, tp > 1, "bf16"})) << block << " tp" << tp;
        }
}

// SP replaces each all-reduce of the f/g path by a reduce-scatter + an
// all-gather of the same tensor: the same bytes. What SP adds is stated by
// two metrics -- the TP all-reduce of the replicated parameters' gradients,
// and the backward re-all-gather of saved input shards (regather) -- and
// nothing else may differ.
TEST(TpSp, SequenceParallelMovesTheAllReducePathsBytes) {
  const std::vector<CaseRecord>& records = sweep_records();
  if (world().rank() != 0) return;
  if (world().size() < 2) GTEST_SKIP() << "needs tp > 1";
  using Key = std::tuple<std::string, std::string, int, int, int>;  // block + FP8 recipe, dtype, ranks, tp, dp
  auto key = [](const CaseRecord& r) {
    return Key{block_of(r), dtype_name(r.config.dtype), r.config.ranks, r.config.parallel.tp, r.config.parallel.dp};
  };
  std::map<Key, double> all_reduce_path;
  for (const CaseRecord& r : records)
    if (!sp_of(r)) all_reduce_path[key(r)] = metric(r, "bytes_sent_per_rank");
  int compared = 0;
  for (const CaseRecord& r : records) {
    if (!sp_of(r)) continue;
    const double sent = metric(r, "bytes_sent_per_rank");
    const double extra_grads = metric(r, "sp_grad_allreduce_bytes_per_rank");
    const double extra_regather = metric(r, "regather_bytes_per_rank");
    ASSERT_TRUE(all_reduce_path.count(key(r))) << r.config.id();
    EXPECT_GT(all_reduce_path.at(key(r)), 0) << r.config.id();
    EXPECT_EQ(sent - extra_grads - extra_regather, all_reduce_path.at(key(r))) << r.config.id();
    EXPECT_EQ(extra_regather > 0, regather_of(r)) << r.config.id();
    EXPECT_EQ(extra_grads > 0, r.config.name != "vocab") << r.config.id();  // vocab has no replicated parameter
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

// Under SP the LayerNorm region holds [b, s/tp, h] and its statistics for
// [b, s/tp] tokens instead of the whole sequence: exactly tp-fold less.
TEST(TpSp, SequenceParallelCutsLayerNormActivationsTpFold) {
  const std::vector<CaseRecord>& records = sweep_records();
  if (world().rank() != 0) return;
  if (world().size() < 2) GTEST_SKIP() << "needs tp > 1";
  using Key = std::tuple<std::string, std::string, int, int, int>;  // as above
  std::map<Key, const CaseRecord*> all_reduce_path;
  auto key = [](const CaseRecord& r) {
    return Key{block_of(r), dtype_name(r.config.dtype), r.config.ranks, r.config.parallel.tp, r.config.parallel.dp};
  };
  for (const CaseRecord& r : records)
    if (!sp_of(r)) all_reduce_path[key(r)] = &r;
  int compared = 0;
  for (const CaseRecord& r : records) {
    if (!sp_of(r) || r.config.name == "vocab") continue;
    const CaseRecord& base = *all_reduce_path.at(key(r));
    const int tp = r.config.parallel.tp;
    EXPECT_EQ(metric(r, "layernorm_activation_bytes_per_rank") * tp,
              metric(base, "layernorm_activation_bytes_per_rank"))
        << r.config.id();
    EXPECT_LT(metric(r, "activation_bytes_per_rank"), metric(base, "activation_bytes_per_rank")) << r.config.id();
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

struct FaultTarget {
  std::vector<std::string> cases;
  std::vector<bool> sp;                // SP settings the fault acts in
  std::vector<std::string> must_fail;  // tensors the fault corrupts (one per case, in order)
  std::vector<std::string> must_pass;  // tensors it leaves alone ("" for none)
  std::string must_report = "";        // the start of a failure line every case must give ("" for none)
};

// Each fault must fail every case it targets, in the tensors it corrupts
// (and only from there on: a fault in backward leaves the forward passing).
TEST(TpSp, EveryPlantedFaultFailsItsCase) {
  if (world().size() < 2) GTEST_SKIP() << "faults in TP communication need two ranks";
  const std::map<std::string, FaultTarget> targets = {
      {"skip_input_grad_reduce",
       {{"tp_sp/mlp", "tp_sp/attn_proj", "tp_sp/vocab"},
        {false, true},
        {"dx", "dx", "dembedding"},
        {"y", "y", "logits"}}},
      {"reduce_scatter_wrong_dim",
       {{"tp_sp/mlp", "tp_sp/attn_proj", "tp_sp/vocab"}, {true}, {"y", "y", "logits"}, {"", "", ""}}},
      {"layernorm_wrong_axis", {{"tp_sp/mlp", "tp_sp/attn_proj"}, {true}, {"y", "y"}, {"", ""}}},
      {"cross_entropy_local_max", {{"tp_sp/vocab"}, {false, true}, {"row_loss"}, {"logits"}}},
      // Each shard's own amax is a finer scale, as accurate end to end: only the
      // scales' equality with the one-rank run's shows it.
      {"fp8_amax_not_reduced_over_tp",
       {{"tp_sp/mlp", "tp_sp/attn_proj"}, {false, true}, {"", ""}, {"y", "y"}, "fp8_scales: "}},
  };
  Registry r = suite_registry("tp_sp");
  std::set<std::string> planted;
  for (const CaseDef* def : r.select({"tp_sp"}))
    for (const std::string& name : def->fault_names()) planted.insert(name);
  for (const std::string& fault : planted) ASSERT_TRUE(targets.count(fault)) << fault << " has no test target";

  for (const auto& [fault, target] : targets)
    for (bool sp : target.sp) {
      RunOptions o = ci_options(target.cases);
      o.fault = fault;
      o.parallel = ParallelConfig{world().size(), 1, 1, 1};
      o.parallel->sp = sp;
      std::vector<CaseRecord> records = run_suite("tp_sp", o);
      if (world().rank() != 0) continue;
      std::set<std::string> cases;  // faults are planted in f32; blocks run unquantized and FP8 cases
      for (const CaseRecord& rec : records) cases.insert("tp_sp/" + rec.config.name);
      EXPECT_EQ(cases.size(), target.cases.size()) << fault;
      for (const CaseRecord& rec : records) {
        const size_t which =
            std::find(target.cases.begin(), target.cases.end(), "tp_sp/" + rec.config.name) - target.cases.begin();
        EXPECT_EQ(rec.conformance.status, "fail") << fault << " was not caught by " << rec.config.id();
        EXPECT_TRUE(rec.error.empty()) << rec.error;
        if (!target.must_report.empty()) {
          const std::vector<std::string>& lines = rec.conformance.failures;
          EXPECT_TRUE(std::any_of(lines.begin(), lines.end(),
                                  [&](const std::string& l) { return l.starts_with(target.must_report); }))
              << fault << " gave no '" << target.must_report << "' line: " << rec.config.id();
        }
        for (const TensorCheck& t : rec.conformance.tensors) {
          if (t.name == target.must_fail[which]) {
            EXPECT_FALSE(t.pass) << fault << " left " << t.name << " passing: " << rec.config.id();
          }
          if (t.name == target.must_pass[which]) {
            EXPECT_TRUE(t.pass) << fault << " broke " << t.name << ": " << rec.config.id();
          }
        }
      }
    }
}

TEST(TpSp, EveryBlockPassesOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  RunOptions o = ci_options({"tp_sp"});
  o.rank_counts = {world().size()};
  const std::vector<CaseRecord> records = run_suite_on_gpu("tp_sp", o);
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.device, Device::cuda) << r.config.id();
    EXPECT_EQ(r.conformance.status, "pass")
        << r.config.id() << " " << r.error << " " << nlohmann::json(r.conformance.failures).dump();
  }
}

TEST(TpSp, PlantedFaultsFailOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  if (world().size() < 2) GTEST_SKIP() << "faults in TP communication need two ranks";
  for (const char* fault : {"skip_input_grad_reduce", "layernorm_wrong_axis", "cross_entropy_local_max"}) {
    RunOptions o = ci_options({"tp_sp"});
    o.fault = fault;
    o.parallel = ParallelConfig{world().size(), 1, 1, 1};
    o.parallel->sp = true;
    const std::vector<CaseRecord> records = run_suite_on_gpu("tp_sp", o);
    if (world().rank() != 0) continue;
    ASSERT_FALSE(records.empty()) << fault;
    for (const CaseRecord& r : records) {
      EXPECT_EQ(r.conformance.status, "fail") << fault << " was not caught on the GPU by " << r.config.id();
      EXPECT_TRUE(r.error.empty()) << r.error;
    }
  }
}

// validate() refuses shapes that do not split, naming both numbers.
TEST(TpSp, BadInputIsRefusedBeforeAnythingRuns) {
  const int n = world().size();
  if (n < 2) GTEST_SKIP() << "needs tp 2";
  struct Row {
    std::string selection;
    nlohmann::json options;
    bool sp;
    std::string message;
  };
  const std::vector<Row> rows = {
      {"tp_sp/mlp", {{"hidden", 33}}, false, "--tp 2 must divide --hidden 33"},
      {"tp_sp/mlp", {{"ffn", 99}}, false, "--tp 2 must divide --ffn 99"},
      {"tp_sp/attn_proj", {{"heads", 3}}, false, "--tp 2 must divide --heads 3"},
      {"tp_sp/attn_proj", {{"heads", 6}, {"hidden", 16}}, false, "--heads 6 must divide --hidden 16"},
      {"tp_sp/vocab", {{"vocab", 101}}, false, "--tp 2 must divide --vocab 101"},
      {"tp_sp/mlp", {{"seq", 7}}, true, "--tp 2 must divide --seq 7 under --sp"},
      {"tp_sp/mlp",
       {{"fp8_recipe", "block"}, {"fp8_history", 4}},
       false,
       "--set fp8_history applies to fp8_recipe=delayed only (fp8_recipe=block)"},
      {"tp_sp/mlp",
       {{"fp8_recipe", "current"}, {"fp8_margin", 1}},
       false,
       "--set fp8_margin applies to fp8_recipe=delayed"},
  };
  for (const Row& row : rows) {
    RunOptions o = ci_options({row.selection});
    o.options = row.options;
    o.parallel = ParallelConfig{2, 1, 1, n / 2};
    o.parallel->sp = row.sp;
    Registry r = suite_registry("tp_sp");
    try {
      plan_run(r, o, n);
      ADD_FAILURE() << row.message << ": no error";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(row.message), std::string::npos) << e.what();
    }
  }
  if (n == 4) {
    RunOptions o = ci_options({"tp_sp/mlp"});
    o.options["batch"] = 3;
    o.parallel = ParallelConfig{2, 1, 1, 2};
    Registry r = suite_registry("tp_sp");
    EXPECT_THROW(
        {
          try {
            plan_run(r, o, n);
          } catch (const UsageError& e) {
            EXPECT_STREQ(e.what(), "--dp 2 must divide --batch 3");
            throw;
          }
        },
        UsageError);
  }
}

}  // namespace
}  // namespace sextant
