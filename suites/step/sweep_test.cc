// The sweep case through the registry the CLI uses (profile ci, tiny
// model): every factorisation ranked by measured throughput beside the
// planners' predictions and the measured split; the contention probe's
// waits per group size; a CUDA sweep's configs.
#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "harness/runner.h"
#include "harness/testing/suite_run.h"
#include "suites/step/step.h"
#include "suites/step/step_testing.h"

namespace sextant {
namespace {

using namespace testing;  // world(), run_suite(): harness/testing/suite_run.h
using step_testing::ci;
using step_testing::dense_bf16;
using step_testing::failures;

// A CUDA sweep plans the same step/train configs as a host sweep, each with
// cuDNN attention (the sweep's own validation once read a host device there
// and dropped every config), and no step/fp8 config unless asked for.
TEST(Step, CudaSweepPlansTheTrainConfigs) {
  SweepRequest req;
  req.profile = Profile::ci, req.ranks = world().size();
  const CaseDef train = step::train_case(), fp8 = step::fp8_case();
  const std::vector<CaseConfig> host = train.configs(req);
  req.device = Device::cuda;
  const std::vector<CaseConfig> cuda = train.configs(req);
  ASSERT_FALSE(cuda.empty());
  EXPECT_EQ(cuda.size(), host.size());
  for (const CaseConfig& c : cuda) {
    EXPECT_EQ(c.device, Device::cuda) << c.id();
    EXPECT_EQ(c.params.value("attention_impl", std::string()), "cudnn") << c.id();
  }
  EXPECT_TRUE(fp8.configs(req).empty());
}

// In f32 with the MoE model, and in bf16 with the dense one.
TEST(Step, SweepRanksTheFactorisations) {
  if (world().size() != 2) GTEST_SKIP() << "runs at 2 ranks";
  RunOptions bf16 = dense_bf16();
  bf16.selection = {"step/sweep"};
  for (const RunOptions& o : {ci({"step/sweep"}), bf16}) {
    std::vector<CaseRecord> records = run_suite("step", o);
    if (world().rank() != 0) continue;
    ASSERT_EQ(records.size(), 1u);
    const CaseRecord& r = records[0];
    EXPECT_EQ(r.config.dtype, o.dtypes.empty() ? DType::f32 : o.dtypes[0]);
    EXPECT_EQ(r.conformance.status, "pass") << r.error << "\n" << failures(r);
    const nlohmann::json& ranking = r.metrics.at("ranking");
    ASSERT_GE(ranking.size(), 3u);  // tp2, cp2, pp2, dp2 (with and without ep) at 2 ranks
    for (size_t i = 1; i < ranking.size(); ++i)
      EXPECT_GE(ranking[i - 1]["tokens_per_s"].get<double>(), ranking[i]["tokens_per_s"].get<double>());
    // Beside each measurement, the calibrated planner's prediction (from the
    // sweep's own calibration, recorded) and the roofline's.
    for (const nlohmann::json& row : ranking) {
      EXPECT_TRUE(row["predicted_step_s"].is_number()) << row.dump();
      EXPECT_GT(row["predicted"].value("gemm_s", 0.0), 0) << row.dump();
      EXPECT_TRUE(row["roofline_step_s"].is_number()) << row.dump();
      // And the measured split to hold the prediction against: the exposed
      // communication of tp and cp where the config has them (none where it
      // lacks them), and the ops of one more step, within that step's time.
      const nlohmann::json& measured = row["measured"];
      const std::string config = row["config"];
      EXPECT_EQ(measured["tp_exposed_s"].get<double>() > 0, config.starts_with("tp2")) << row.dump();
      EXPECT_EQ(measured["cp_exposed_s"].get<double>() > 0, config.find("cp2") != std::string::npos) << row.dump();
      EXPECT_GT(measured["op_s"]["gemm"].get<double>(), 0) << row.dump();
      EXPECT_GT(measured["op_s"]["attention"].get<double>(), 0) << row.dump();
      double ops = 0;
      for (const auto& [op, seconds] : measured["op_s"].items()) ops += seconds.get<double>();
      EXPECT_LE(ops, measured["op_step_s"].get<double>()) << row.dump();
    }
    EXPECT_TRUE(r.metrics.contains("calibration"));
    // The MoE model's routing, permutes and combine, measured per token
    // (the dense model has none to measure).
    const nlohmann::json& routing = r.metrics.at("calibration").at("moe_routing");
    const bool moe = o.options.value("moe_every", 1) > 0;
    EXPECT_EQ(routing.at("forward_tokens_per_s").get<double>() > 0, moe) << routing.dump();
    EXPECT_EQ(routing.at("backward_tokens_per_s").get<double>() > 0, moe) << routing.dump();
    // Every link the 2-rank configs use, with a latency and a bandwidth.
    const nlohmann::json& links = r.metrics.at("calibration").at("links");
    for (const char* op : {"all_gather", "reduce_scatter", "all_reduce", "all_to_all_v", "sendrecv"}) {
      const nlohmann::json& link = links.at(std::string(op) + "/intra/2");
      EXPECT_GT(link.at("latency_s").get<double>(), 0) << op;
      EXPECT_GT(link.at("busbw_GBps").get<double>(), 0) << op;
    }
    EXPECT_GT(r.metrics.at("compute_slowdown").at("value").get<double>(), 0);
    // The record holds all the planner read: replayed by this build, every
    // config's prediction comes back exactly.
    const std::vector<step::ReplayedConfig> replayed =
        step::replay_sweep(r.config.params, r.config.ranks, r.metrics,
                           static_cast<int>(std::thread::hardware_concurrency()), openblas_get_num_threads());
    ASSERT_EQ(replayed.size(), ranking.size());
    for (const step::ReplayedConfig& c : replayed) {
      EXPECT_TRUE(std::isfinite(c.recorded_s)) << c.config;
      EXPECT_NEAR(c.replayed_s, c.recorded_s, 1e-12 * c.recorded_s) << c.config;
    }
    EXPECT_TRUE(std::isfinite(r.metrics.at("planner_abs_error_median_pct").at("value").get<double>()));
  }
}

// At 4 ranks the configs use groups of 2 besides all 4: the contention
// probe measures the wait on pairs too (the planner's use of it is
// calibration_test.cc's to check).
TEST(Step, SweepMeasuresTheWaitOfEachGroupSize) {
  if (world().size() != 4) GTEST_SKIP() << "runs at 4 ranks";
  std::vector<CaseRecord> records = run_suite("step", ci({"step/sweep"}));
  if (world().rank() != 0) return;
  ASSERT_EQ(records.size(), 1u);
  const CaseRecord& r = records[0];
  EXPECT_EQ(r.conformance.status, "pass") << r.error << "\n" << failures(r);
  const nlohmann::json& groups = r.metrics.at("sync_by_group_size");
  ASSERT_TRUE(groups.contains("2")) << groups.dump();
  EXPECT_EQ(groups.size(), 1u) << groups.dump();  // 4 is the probe's own sync_s
  EXPECT_TRUE(std::isfinite(groups.at("2").get<double>())) << groups.dump();
}

}  // namespace
}  // namespace sextant
