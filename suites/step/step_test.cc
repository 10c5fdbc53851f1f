// The step suite through the registry the CLI uses (profile ci, tiny model):
// every config of the rank count passes K = 3 steps against the float64
// reference, the configs agree with each other, and every planted fault
// fails the configs where it can show.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <tuple>

#include "harness/runner.h"
#include "harness/testing/gpu.h"
#include "harness/testing/suite_run.h"
#include "kernels/model/trainer.h"
#include "suites/step/check.h"
#include "suites/step/step.h"
#include "suites/step/step_testing.h"

namespace sextant {
namespace {

using namespace testing;  // world(), run_suite(): harness/testing/suite_run.h
using step_testing::ci;
using step_testing::dense_bf16;
using step_testing::failures;

double loss_at(const CaseRecord& r, size_t step) { return r.metrics.at("losses").at(step).get<double>(); }

// The tightest checks of a record (error / bound), for the log.
void print_margins(const CaseRecord& r) {
  std::vector<TensorCheck> t = r.conformance.tensors;
  std::sort(t.begin(), t.end(),
            [](const TensorCheck& a, const TensorCheck& b) { return a.error / a.bound > b.error / b.bound; });
  std::cout << r.config.id() << "\n";
  for (size_t i = 0; i < std::min<size_t>(3, t.size()); ++i)
    std::cout << "  " << t[i].name << " error " << t[i].error << " base " << t[i].base_error << " bound " << t[i].bound
              << "\n";
}

// Every record (complete on rank 0) passed on `device`, with its margins logged.
void expect_every_record_passes(const std::vector<CaseRecord>& records, Device device, DType dtype) {
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    print_margins(r);
    EXPECT_EQ(r.device, device) << r.config.id();
    EXPECT_EQ(r.config.dtype, dtype) << r.config.id();
    EXPECT_EQ(r.conformance.status, "pass") << r.config.id() << " " << r.error << "\n" << failures(r);
    EXPECT_GT(r.conformance.tensors.size(), 50u) << r.config.id();
    EXPECT_EQ(r.metrics.at("losses").size(), 3u) << r.config.id();
    EXPECT_GT(r.metrics.at("tokens_per_s").at("value").get<double>(), 0) << r.config.id();
  }
}

// Every config against every other that trains the same model (KV heads,
// head dims, packing) on the same tokens: the same losses, step by step (f32).
void expect_equal_losses(const std::vector<CaseRecord>& records) {
  const auto model = [](const CaseRecord& r) {
    const nlohmann::json& p = r.config.params;
    return std::tuple{p.value("own_dataset", false),
                      p.value("kv_heads", int64_t{0}),
                      p.value("head_dim", int64_t{0}),
                      p.value("v_head_dim", int64_t{0}),
                      p.value("seq_lens", nlohmann::json()).dump(),
                      p.value("window", int64_t{-1}),
                      p.value("pad_to", int64_t{1}),
                      p.value("tail_padding", int64_t{0})};
  };
  for (const CaseRecord& a : records)
    for (const CaseRecord& b : records)
      for (size_t k = 0; k < 3 && model(a) == model(b); ++k)
        EXPECT_NEAR(loss_at(a, k), loss_at(b, k), 1e-5 * std::abs(loss_at(b, k)))
            << a.config.id() << " vs " << b.config.id() << " step " << k + 1;
}

// Packed runs: every record passes and trains as the others; one rank's
// run (`one`) has the losses of `same` (one record each) within `rel`.
void expect_packed_runs(const std::vector<CaseRecord>& packed, const std::vector<CaseRecord>& one,
                        const std::vector<CaseRecord>& same, double rel) {
  expect_every_record_passes(packed, Device::host, DType::f32);
  expect_equal_losses(packed);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(same.size(), 1u);
  for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(loss_at(one[0], k), loss_at(same[0], k), rel * loss_at(same[0], k));
}

// The step's peak memory is counted by kind, and the planner's estimate of
// the same config is within the goal of 10% of it (docs/DESIGN.md).
void expect_memory_counted_and_estimated(const CaseRecord& r) {
  const nlohmann::json& memory = r.metrics.at("memory");
  for (const char* kind : {"weights", "gradients", "optimizer", "activations", "workspace"})
    EXPECT_GT(memory.at("measured").at(kind).get<double>(), 0) << r.config.id() << " " << kind;
  EXPECT_EQ(r.metrics.at("memory_peak_bytes").at("value").get<double>(),
            memory.at("measured").at("total").get<double>())
      << r.config.id();
  EXPECT_LE(std::abs(r.metrics.at("memory_estimate_error_pct").at("value").get<double>()), 10.0)
      << r.config.id() << "\n measured " << memory.at("measured").dump() << "\n estimate "
      << memory.at("estimate").dump();
}

// A token routed to another expert set is found (the order within a token's top-k does not matter).
TEST(Step, RoutingDifferencesAreFoundTokenByToken) {
  const Tensor want = Tensor::from_values({3, 2}, {0, 1, 2, 3, 4, 5}, DType::f64);
  const Tensor got = Tensor::from_values({3, 2}, {1, 0, 2, 4, 4, 5}, DType::f64);
  EXPECT_EQ(step::routing_differences(got, want), std::vector<int64_t>{1});
  EXPECT_TRUE(step::routing_differences(want, want).empty());
}

// A recipe's options fill in what the user left open; what the user set stays.
TEST(Step, TheUsersOptionsWinOverARecipes) {
  SweepRequest req;
  req.ranks = 4;
  req.options = {{"cp_layout", "zigzag"}, {"microbatches", 1}};
  const step::Recipe r{ParallelConfig{1, 2, 1, 2}, {{"cp_layout", "contiguous"}, {"microbatches", 2}, {"zero", true}}};
  // params: the profile's sizes with the user's model keys, as the sweep passes them.
  const CaseConfig c = step::make_config(req, {{"seq", 32}, {"cp_layout", "zigzag"}}, r, DType::f32);
  EXPECT_EQ(c.params.at("cp_layout"), "zigzag");
  EXPECT_EQ(c.params.at("microbatches"), 1);
  EXPECT_EQ(c.params.at("zero"), true);
}

TEST(Step, EveryConfigMatchesTheReferenceForThreeSteps) {
  std::vector<CaseRecord> records = run_suite("step", ci());
  if (world().rank() != 0) return;
  expect_every_record_passes(records, Device::host, DType::f32);
  int mla = 0, padded = 0;  // MLA's head dims (v narrower than q and k); padded packed rows
  for (const CaseRecord& r : records) {
    EXPECT_GT(r.conformance.tensors.size(), 100u) << r.config.id();  // MoE layers: expert tensors too
    EXPECT_TRUE(r.metrics.contains("time_split")) << r.config.id();
    expect_memory_counted_and_estimated(r);
    const int64_t dv = r.config.params.value("v_head_dim", int64_t{0});
    mla += dv > 0 && dv < r.config.params.value("head_dim", int64_t{0});
    padded += r.config.params.value("tail_padding", int64_t{0}) > 0;
  }
  if (world().size() >= 2) {
    EXPECT_GT(mla, 0) << "no MLA recipe at " << world().size() << " ranks";
    EXPECT_GT(padded, 0) << "no padded packed rows at " << world().size() << " ranks";
  }
  expect_equal_losses(records);
}

// Packed rows (two sequences of 20 and 12 tokens per row, THD): every config
// attends within each sequence, as the reference does on its own. One
// "packed" sequence of 32 is the plain row: the same data and losses.
TEST(Step, PackedRowsMatchTheReference) {
  RunOptions o = ci();
  o.options["seq"] = 32;
  o.options["seq_lens"] = "20,12";
  std::vector<CaseRecord> packed = run_suite("step", o);
  o.rank_counts = {1};
  o.options["seq_lens"] = "32";
  std::vector<CaseRecord> one = run_suite("step", o);
  o.options.erase("seq_lens");
  std::vector<CaseRecord> plain = run_suite("step", o);
  if (world().rank() != 0) return;
  expect_packed_runs(packed, one, plain, 1e-6);
  for (const CaseRecord& r : packed)
    EXPECT_EQ(r.config.params.at("seq_lens"), nlohmann::json({20, 12})) << r.config.id();
}

// Padded packed rows (sequences of 19, 1, 0 and 2 tokens, each padded to a
// multiple of 4 rows, then 4 rows of tail padding: 32 rows) in every config
// that splits them (cp of 1 or 2); padding predicts nothing and is seen by
// nothing, so one rank trains as on the same sequences packed without
// padding (22 rows, the same tokens).
TEST(Step, PaddedRowsMatchTheReference) {
  RunOptions o = ci();
  o.options["seq"] = 32;
  o.options["seq_lens"] = "19,1,0,2";
  o.options["pad_to"] = 4;
  o.options["tail_padding"] = 4;
  std::vector<CaseRecord> padded = run_suite("step", o);
  o.rank_counts = {1};
  std::vector<CaseRecord> one = run_suite("step", o);
  o.options.erase("pad_to");
  o.options.erase("tail_padding");
  o.options["seq"] = 22;
  std::vector<CaseRecord> tight = run_suite("step", o);
  if (world().rank() != 0) return;
  expect_packed_runs(padded, one, tight, 1e-5);
}

// The configs with a pipeline (pp > 1) under NCCL's point-to-point rules
// (no tags, one stream), where the pipeline's messages are ordered for NCCL.
TEST(Step, EveryConfigPassesUnderNcclRules) {
  std::vector<CaseRecord> records = run_suite_under_nccl_rules("step", ci());
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records)
    EXPECT_EQ(r.conformance.status, "pass") << r.config.id() << " " << r.error << "\n" << failures(r);
}

// Each fault must fail every config where it can show (a fault invisible
// at this rank count plants no instance).
TEST(Step, EveryPlantedFaultIsCaught) {
  if (world().size() < 2) GTEST_SKIP() << "faults need two ranks";
  int planted = 0;
  for (const std::string& fault : model::step_faults().names()) {
    RunOptions o = ci({"step/train", "step/fp8"});
    o.fault = fault;
    std::vector<CaseRecord> records = run_suite("step", o);
    if (world().rank() != 0) continue;
    for (const CaseRecord& r : records) {
      ++planted;
      EXPECT_EQ(r.conformance.status, "fail") << fault << " was not caught by " << r.config.id();
      EXPECT_TRUE(r.error.empty()) << fault << " crashed instead of failing the check: " << r.error;
      const auto failed = std::count_if(r.conformance.tensors.begin(), r.conformance.tensors.end(),
                                        [](const TensorCheck& t) { return !t.pass; });
      EXPECT_GT(failed + static_cast<long>(r.conformance.failures.size()), 0) << fault << " " << r.config.id();
      std::cout << fault << ": " << failed << " tensors fail in " << r.config.id() << "\n";
    }
  }
  if (world().rank() == 0 && world().size() == 2) {
    EXPECT_GE(planted, static_cast<int>(model::step_faults().names().size())) << "every fault must show at 2 ranks";
  }
}

// FP8 linears (a dense model, bf16 storage): the fp8 case's recipes, and
// each of TransformerEngine's recipes over them, within the fp8_model bound
// of the unquantized float64 reference, each rank's scales those of the
// other ranks of its layers (checked inside), the recipe in the results and
// MFU against both peaks.
TEST(Step, Fp8LinearsMatchTheReferenceUnderEveryRecipe) {
  for (const char* recipe : {"", "delayed", "current", "block", "mxfp8"}) {
    RunOptions o = ci({"step/fp8"});
    if (*recipe) o.options["fp8_recipe"] = recipe;
    std::vector<CaseRecord> records = run_suite("step", o);
    if (world().rank() != 0) continue;
    expect_every_record_passes(records, Device::host, DType::bf16);
    for (const CaseRecord& r : records) {
      const nlohmann::json& p = r.config.params;
      EXPECT_EQ(p.value("moe_every", -1), 0) << r.config.id();
      if (*recipe) {
        EXPECT_EQ(p.value("fp8_recipe", ""), recipe) << r.config.id();
      }
      EXPECT_TRUE(p.contains("fp8_format")) << r.config.id();
      EXPECT_EQ(r.conformance.tensors.front().op, "fp8_model") << r.config.id();
      for (const TensorCheck& t : r.conformance.tensors)
        EXPECT_LT(t.base_bound, 1.0) << "a gate a zero gradient passes: " << t.name << " of " << r.config.id();
      EXPECT_GT(r.metrics.at("mfu_fp8").at("value").get<double>(), 0) << r.config.id();
      EXPECT_NE(r.metrics.at("fp8_peak_source").get<std::string>().find("emulated"), std::string::npos);
    }
  }
}

// Overlap changes when the gradient buckets and parameter gathers
// communicate, not what: the same buckets reduce the same bytes, so K steps
// with and without overlap give the same losses, gradients and parameters
// bit for bit. A dp x ep MoE config with ZeRO and plain Adam, and from 4
// ranks a pipeline whose schedule splits I and W.
TEST(Step, OverlapGivesTheSameBits) {
  const int n = world().size();
  if (n < 2) GTEST_SKIP() << "needs a data-parallel group";
  SweepRequest req;
  req.profile = Profile::ci, req.ranks = n;
  nlohmann::json sizes = step::default_params(req);
  sizes["batch"] = 2 * n;  // whole sequences for every replica and microbatch
  std::vector<std::pair<ParallelConfig, nlohmann::json>> configs = {{ParallelConfig{1, 1, 1, n, 2}, {{"zero", true}}},
                                                                    {ParallelConfig{1, 1, 1, n, 2}, {{"zero", false}}}};
  if (n % 4 == 0)
    configs.push_back({ParallelConfig{1, 1, 2, n / 2}, {{"zero", true}, {"microbatches", 2}, {"schedule", "zb-h1"}}});
  std::unique_ptr<Communicator> self = world().split(world().rank(), 0);
  for (const auto& [parallel, options] : configs) {
    const bool zero = options.at("zero").get<bool>();
    std::vector<step::RunRecord> runs;
    for (bool overlap : {false, true}) {
      nlohmann::json params = sizes;
      params.update(options);
      params["overlap_grad_reduce"] = overlap;
      params["overlap_param_gather"] = overlap && zero;
      const model::GptConfig c = model::gpt_config_from_json(params);
      GridComms grid = make_grid_comms(world(), parallel);
      model::ModelComms comms = model::make_model_comms(grid, world(), world(), *self, c);
      model::GptTrainer trainer(c, comms, 1234);
      runs.push_back(step::run_steps(trainer, world(), 3, nullptr));
      if (overlap) {
        EXPECT_GT(trainer.buckets_started_in_backward(), 0) << "no bucket was reduced during the backward";
      }
    }
    if (world().rank() != 0) continue;
    const std::string id = to_string(parallel) + (zero ? " zero" : "");
    for (size_t k = 0; k < runs[0].size(); ++k) {
      EXPECT_EQ(runs[0][k].loss, runs[1][k].loss) << id << " step " << k + 1;
      for (const auto& [kind, plain, overlapped] : {std::tuple{"grad", &runs[0][k].grads, &runs[1][k].grads},
                                                    std::tuple{"param", &runs[0][k].params, &runs[1][k].params}})
        for (const auto& [name, want] : *plain) {
          const Tensor& got = overlapped->at(name);
          ASSERT_EQ(got.numel(), want.numel());
          EXPECT_EQ(std::memcmp(got.raw(), want.raw(), static_cast<size_t>(want.numel()) * 4), 0)
              << id << " step " << k + 1 << " " << kind << " " << name << " differs with overlap";
        }
    }
  }
}

// Activation recomputation changes when activations are computed, not
// their values: selective and full recomputation give the loss, gradients
// and parameters of no recomputation bit for bit over 3 steps, under TP+SP,
// CP, PP with two microbatches and the MoE layers of the default model.
// (That the recomputed path runs at all, recompute_wrong_input shows: it
// fails EveryPlantedFaultIsCaught.)
TEST(Step, RecomputeGivesTheSameBits) {
  const int n = world().size();
  SweepRequest req;
  req.profile = Profile::ci, req.ranks = n;
  nlohmann::json sizes = step::default_params(req);
  sizes["batch"] = 2 * n;  // whole sequences for every replica and microbatch
  std::vector<std::pair<ParallelConfig, nlohmann::json>> configs = {
      {ParallelConfig{1, 1, 1, n}, {{"microbatches", 2}}}};
  if (n % 2 == 0) {
    ParallelConfig tp{2, 1, 1, n / 2};
    tp.sp = true;
    configs.push_back({tp, nlohmann::json::object()});
    configs.push_back({ParallelConfig{1, 2, 1, n / 2}, nlohmann::json::object()});
    configs.push_back({ParallelConfig{1, 1, 2, n / 2}, {{"microbatches", 2}}});
  }
  std::unique_ptr<Communicator> self = world().split(world().rank(), 0);
  for (const auto& [parallel, options] : configs) {
    std::vector<step::RunRecord> runs;
    for (const char* recompute : {"none", "selective", "full"}) {
      nlohmann::json params = sizes;
      params.update(options);
      params["recompute"] = recompute;
      const model::GptConfig c = model::gpt_config_from_json(params);
      GridComms grid = make_grid_comms(world(), parallel);
      model::ModelComms comms = model::make_model_comms(grid, world(), world(), *self, c);
      model::GptTrainer trainer(c, comms, 1234);
      runs.push_back(step::run_steps(trainer, world(), 3, nullptr));
    }
    if (world().rank() != 0) continue;
    for (size_t r = 1; r < runs.size(); ++r) {
      const std::string id = to_string(parallel) + (r == 1 ? " selective" : " full");
      for (size_t k = 0; k < runs[0].size(); ++k) {
        EXPECT_EQ(runs[0][k].loss, runs[r][k].loss) << id << " step " << k + 1;
        for (const auto& [kind, plain, recomputed] : {std::tuple{"grad", &runs[0][k].grads, &runs[r][k].grads},
                                                      std::tuple{"param", &runs[0][k].params, &runs[r][k].params}})
          for (const auto& [name, want] : *plain) {
            const Tensor& got = recomputed->at(name);
            ASSERT_EQ(got.numel(), want.numel());
            EXPECT_EQ(std::memcmp(got.raw(), want.raw(), static_cast<size_t>(want.numel()) * 4), 0)
                << id << " step " << k + 1 << " " << kind << " " << name << " differs from no recomputation";
          }
      }
    }
  }
}

// Mixed precision (bf16 activations and compute weights; f32 parameters,
// gradients and Adam state) on a dense model: every config within its bound
// of the float64 reference, the bound set by the same model in bf16 on one
// rank; and every fault that can show is caught in bf16 too.
TEST(Step, DenseModelInBf16MatchesTheReference) {
  std::vector<CaseRecord> records = run_suite("step", dense_bf16());
  if (world().rank() != 0) return;
  expect_every_record_passes(records, Device::host, DType::bf16);
}

TEST(Step, EveryVisibleFaultIsCaughtInBf16) {
  if (world().size() < 2) GTEST_SKIP() << "faults need two ranks";
  for (const std::string& fault : model::step_faults().names()) {
    RunOptions o = dense_bf16();
    o.fault = fault;
    std::vector<CaseRecord> records = run_suite("step", o);
    if (world().rank() != 0) continue;
    for (const CaseRecord& r : records) {
      EXPECT_EQ(r.conformance.status, "fail") << fault << " was not caught in bf16 by " << r.config.id();
      EXPECT_TRUE(r.error.empty()) << fault << " crashed instead of failing the check: " << r.error;
    }
  }
}

// The device path: parameters, activations, gradients and Adam state on the
// GPU, gradient buckets reduced through the communicators on device buffers
// (the ranks share the GPU: staged), checked against the same float64
// reference and a one-rank baseline run on the GPU, step after step.
TEST(Step, EveryConfigPassesOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  std::vector<CaseRecord> records = run_suite_on_gpu("step", ci());
  if (world().rank() != 0) return;
  expect_every_record_passes(records, Device::cuda, DType::f32);
  expect_equal_losses(records);
}

// bf16 on the device: cuBLAS bf16 gemms, bf16 activations between the stages.
TEST(Step, DenseModelInBf16PassesOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  std::vector<CaseRecord> records = run_suite_on_gpu("step", dense_bf16());
  if (world().rank() != 0) return;
  expect_every_record_passes(records, Device::cuda, DType::bf16);
}

// The gradient reduction on device buffers must still be checked: a dense
// bucket summed over dp only (not dp x cp) fails every config with cp > 1.
TEST(Step, SkippedCpGradientReduceIsCaughtOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  if (world().size() < 2) GTEST_SKIP() << "the fault needs cp 2, two ranks";
  RunOptions o = ci();
  o.fault = "no_cp_grad_reduce";
  std::vector<CaseRecord> records = run_suite_on_gpu("step", o);
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty()) << "no config of " << world().size() << " ranks has cp > 1";
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.conformance.status, "fail") << "no_cp_grad_reduce was not caught on the GPU by " << r.config.id();
    EXPECT_TRUE(r.error.empty()) << r.config.id() << " crashed instead of failing the check: " << r.error;
  }
}

}  // namespace
}  // namespace sextant
