// The pipeline suite through the same registry the CLI uses: every schedule
// passes at every pipeline config of the world (pp 2 and 4, times tp with SP
// or dp; pp 1 on one rank), all schedules agree with each other, every
// planted fault fails its case (the schedule faults before anything runs, with
// the grid), users' CSV schedules run or are refused naming rank and step, and
// bad input is refused before anything runs.
#include "suites/pipeline/pipeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "harness/compare.h"
#include "harness/error.h"
#include "harness/runner.h"
#include "harness/testing/gpu.h"
#include "harness/testing/suite_run.h"
#include "harness/tolerance.h"
#include "kernels/pipeline/generators.h"
#include "kernels/pipeline/validate.h"

namespace sextant {
namespace {

using namespace testing;  // world(), ci_options(), run_suite(): harness/testing/suite_run.h

// The world's pipelines; one rank runs every schedule as a pipeline of one.
RunOptions small() {
  RunOptions o = ci_options({"pipeline"});
  if (world().size() == 1)
    o.parallel = ParallelConfig{};  // pp 1: each schedule's stages all on one rank (local hand-offs)
  else o.rank_counts = {world().size()};
  return o;
}

const std::vector<CaseRecord>& sweep_records() {
  static const std::vector<CaseRecord> records = run_suite("pipeline", small());
  return records;
}

std::string schedule_of(const CaseRecord& r) { return r.config.params.at("schedule").get<std::string>(); }
int microbatches_of(const CaseRecord& r) { return r.config.params.at("microbatches").get<int>(); }

std::string details(const CaseRecord& r) {
  return r.config.id() + " " + r.error + " " + nlohmann::json(r.conformance).dump();
}

TEST(Pipeline, EveryScheduleCaseAndConfigPasses) {
  const std::vector<CaseRecord>& records = sweep_records();
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  std::set<std::tuple<std::string, int, int, int, int>> seen;  // schedule, pp, tp, dp, v
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.conformance.status, "pass") << details(r);
    EXPECT_EQ(r.conformance.tensors.size(), 7u) << r.config.id();  // loss and six weight-gradient kinds
    for (const char* m : {"bubble_measured_mean", "bubble_measured_max", "bubble_simulated", "bubble_closed_form",
                          "makespan_s", "microbatches_per_s", "peak_activations", "timeline"})
      EXPECT_TRUE(r.metrics.contains(m)) << r.config.id() << " lacks " << m;
    const ParallelConfig& pc = r.config.parallel;
    seen.insert({schedule_of(r), pc.pp, pc.tp, pc.dp, pc.vpp});
    ASSERT_EQ(static_cast<int>(r.metrics.at("timeline").size()), pc.pp) << r.config.id();
    const int m = microbatches_of(r), p = pc.pp;
    if (schedule_of(r) == "gpipe") {
      EXPECT_EQ(metric(r, "peak_activations"), m) << r.config.id();
    }
    if (schedule_of(r) == "1f1b") {
      EXPECT_EQ(metric(r, "peak_activations"), std::min(m, p)) << r.config.id();
    }
    const bool v_not_full = schedule_of(r) == "zb-v" && m < 2 * p - 1;  // the closed form needs the V full
    EXPECT_EQ(r.metrics.at("bubble_closed_form").at("value").is_null(), v_not_full) << r.config.id();
  }
  const int n = world().size();
  for (const char* s : {"gpipe", "1f1b", "zb-h1"}) EXPECT_TRUE(seen.count({s, n, 1, 1, 1})) << s;
  for (int v : {1, 2}) EXPECT_TRUE(seen.count({"interleaved", n, 1, 1, v})) << "interleaved v" << v;
  for (const char* s : {"zb-v", "dualpipe-v"}) EXPECT_TRUE(seen.count({s, n, 1, 1, 2})) << s;
  if (n == 4)
    for (const char* s : {"gpipe", "1f1b", "zb-h1"}) {
      EXPECT_TRUE(seen.count({s, 2, 2, 1, 1})) << s << " pp2 x tp2";
      EXPECT_TRUE(seen.count({s, 2, 1, 2, 1})) << s << " pp2 x dp2";
    }
}

// NCCL has no tags and one stream: the executor's message order must run
// there too. Host buffers under NCCL's point-to-point rules.
TEST(Pipeline, EveryScheduleCasePassesUnderNcclRules) {
  const std::vector<CaseRecord> records = run_suite_under_nccl_rules("pipeline", small());
  if (world().rank() != 0) return;
  ASSERT_EQ(records.size(), sweep_records().size());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.backend, "mpi-nccl-rules") << r.config.id();
    EXPECT_EQ(r.conformance.status, "pass") << details(r);
  }
}

// Every schedule computes the same step: at one config and microbatch count
// the losses and the gradients' fingerprints agree to the f32 floor.
TEST(Pipeline, AllSchedulesAgreeWithEachOther) {
  const std::vector<CaseRecord>& records = sweep_records();
  if (world().rank() != 0) return;
  using Key = std::tuple<int, int, int, int>;  // pp, tp, dp, m
  std::map<Key, const CaseRecord*> first;
  std::map<Key, std::set<std::string>> schedules;
  const double floor = expected_error(DType::f32, OpClass::model);
  for (const CaseRecord& r : records) {
    const ParallelConfig& pc = r.config.parallel;
    const Key key{pc.pp, pc.tp, pc.dp, microbatches_of(r)};
    schedules[key].insert(schedule_of(r));
    if (!first.count(key)) {
      first[key] = &r;
      continue;
    }
    const nlohmann::json& a = first[key]->conformance.notes;
    const nlohmann::json& b = r.conformance.notes;
    const double la = a.at("loss").get<double>(), lb = b.at("loss").get<double>();
    EXPECT_LE(std::abs(la - lb), floor * std::abs(la)) << r.config.id() << " vs " << first[key]->config.id();
    for (const auto& [kind, value] : a.at("grad_fingerprint").items()) {
      const double fa = value.get<double>(), fb = b.at("grad_fingerprint").at(kind).get<double>();
      EXPECT_LE(std::abs(fa - fb), floor * std::abs(fa)) << kind << " " << r.config.id();
    }
  }
  for (const auto& [key, names] : schedules) EXPECT_GE(names.size(), 5u);  // compared across schedules
}

// Each planted fault fails every case it is planted in; the schedule faults
// are refused by the validator before anything runs.
TEST(Pipeline, EveryPlantedFaultFails) {
  const std::map<std::string, std::string> expected_error{{"missing_backward", "coverage:"},
                                                          {"deadlock", "deadlock:"},
                                                          {"wrong_peer", "nobody receives the activation"},
                                                          {"eager_receives", "deadlocks under NCCL's rules"},
                                                          {"accumulate_twice", ""}};
  for (const std::string& fault : pp::faults().names()) {
    if (!pp::faults().shows(pp::faults().parse(fault), {world().size(), 2 * world().size()}))
      continue;  // no messages on one rank
    RunOptions o = small();
    o.options["microbatches"] = 2 * world().size();  // every schedule's minimum at every pp of the world
    o.fault = fault;
    std::vector<CaseRecord> records = run_suite("pipeline", o);
    if (world().rank() != 0) continue;
    ASSERT_FALSE(records.empty()) << fault;
    for (const CaseRecord& r : records) {
      EXPECT_EQ(r.conformance.status, "fail") << fault << " was not caught by " << r.config.id();
      const std::string& want = expected_error.at(fault);
      if (!want.empty()) {
        EXPECT_NE(r.error.find(want), std::string::npos) << details(r);
        if (fault == "missing_backward" || fault == "deadlock") {
          EXPECT_NE(r.error.find("\n rank 0"), std::string::npos) << "no grid: " << r.error;
          EXPECT_NE(r.error.find(']'), std::string::npos) << "no marked step: " << r.error;
        }
        EXPECT_TRUE(r.conformance.tensors.empty()) << fault << " ran before it was refused: " << r.config.id();
        continue;
      }
      std::set<std::string> failed;  // accumulate_twice: the gradients fail, the loss does not
      for (const TensorCheck& t : r.conformance.tensors)
        if (!t.pass) failed.insert(t.name);
      EXPECT_FALSE(failed.count("loss")) << details(r);
      EXPECT_TRUE(failed.count("dw1") && failed.count("dw2")) << details(r);
    }
  }
}

// The device path: the stages' TP MLPs on device tensors, activations and
// gradients sent as device buffers (staged through host memory, so the ranks
// share the GPU), action times taken after the GPU finished each action.
TEST(Pipeline, EveryScheduleCasePassesOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  const std::vector<CaseRecord> records = run_suite_on_gpu("pipeline", small());
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    EXPECT_EQ(r.device, Device::cuda) << r.config.id();
    EXPECT_EQ(r.conformance.status, "pass") << details(r);
    EXPECT_TRUE(r.metrics.contains("bubble_measured_mean")) << r.config.id();
  }
}

TEST(Pipeline, AccumulateTwiceIsCaughtOnTheGpu) {
  SEXTANT_REQUIRE_GPU();
  RunOptions o = small();
  o.options["microbatches"] = 2 * world().size();
  o.fault = "accumulate_twice";
  const std::vector<CaseRecord> records = run_suite_on_gpu("pipeline", o);
  if (world().rank() != 0) return;
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) EXPECT_EQ(r.conformance.status, "fail") << details(r);
}

pipeline::Problem problem(const std::string& schedule, int p, int m, int v) {
  pipeline::Problem pr;
  pr.schedule = schedule;
  pr.generated = pp::find_schedule(schedule);
  pr.pp = p;
  pr.microbatches = m;
  pr.chunks = v;
  pr.stages = p * v;
  return pr;
}

// The validator's refusal names the rule, rank and step, and its grid marks the step.
TEST(Pipeline, PlantedScheduleFaultsShowTheGridWithTheFailingStep) {
  for (const auto& [fault, rule] :
       {std::pair{pp::Fault::missing_backward, "coverage:"}, {pp::Fault::deadlock, "deadlock:"}})
    for (const auto& [name, v] : {std::pair{"1f1b", 1}, {"zb-h1", 1}, {"interleaved", 2}, {"zb-v", 2}}) {
      const pp::Schedule s = pipeline::build_schedule(problem(name, 2, 4, v), fault);
      try {
        pp::validate(s);
        ADD_FAILURE() << pp::faults().name(fault) << " " << name << " passed the validator";
      } catch (const pp::ScheduleError& e) {
        EXPECT_EQ(std::string(e.what()).rfind(rule, 0), 0u) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank "), std::string::npos) << e.what();
        EXPECT_FALSE(e.marks().empty()) << e.what();
        EXPECT_NE(e.details().find('['), std::string::npos) << e.details();
        EXPECT_NE(e.details().find("rank 1"), std::string::npos) << e.details();
      }
    }
}

// A file in the temp folder that removes itself.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    path = (std::filesystem::temp_directory_path() /
            ("pipeline_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++) + ".csv"))
               .string();
    std::ofstream(path) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

RunOptions csv_options(const std::string& path) {
  RunOptions o = small();
  o.options["schedule"] = "csv";
  o.options["schedule_file"] = path;
  return o;
}

// A user's schedule runs through the same executor and checks.
TEST(Pipeline, AUsersCsvScheduleRunsAndPasses) {
  const int p = world().size();
  TempFile file("# 1F1B written out by hand\n" + pp::to_csv(pp::one_f_one_b(p, 2 * p)));
  std::vector<CaseRecord> records = run_suite("pipeline", csv_options(file.path));
  if (world().rank() != 0) return;
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].config.name, "csv");
  EXPECT_EQ(records[0].conformance.status, "pass") << details(records[0]);
  EXPECT_EQ(microbatches_of(records[0]), 2 * p);
  EXPECT_TRUE(records[0].metrics.at("bubble_closed_form").at("value").is_null());
}

// Bad CSVs are refused while planning: nothing runs. The message names the rule,
// the rank and the step.
TEST(Pipeline, BadCsvSchedulesAreRefusedNamingRankAndStep) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"0F0,0X1\n", "CSV rank 0 step 1: unknown action '0X1'"},
      {"0F0,0B0\n1B0,1F0\n", "local order: rank 1 step 0 runs 1B0 before 1F0"},
      {"0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n", "deadlock: with blocking receives rank 0 step 1"},
      {"0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n", "coverage: stage 0 microbatch 1 on rank 0 has no backward"},
  };
  Registry r = suite_registry("pipeline");
  for (const auto& [text, message] : bad) {
    TempFile file(text);
    RunOptions o = csv_options(file.path);
    o.rank_counts.clear();
    o.parallel = ParallelConfig{};
    o.parallel->pp = 2;
    try {
      plan_run(r, o, 2);
      ADD_FAILURE() << "accepted:\n" << text;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
    }
  }
}

// Bad input: one line naming the rule and its numbers, before anything runs.
TEST(Pipeline, BadInputIsRefusedWhilePlanning) {
  struct Bad {
    std::string selection;
    int pp, vpp;
    nlohmann::json options;
    std::string message;
  };
  const std::vector<Bad> bad{
      {"pipeline/1f1b", 4, 1, {{"layers", 6}}, "--layers 6 must be divisible by pp*v = 4*1 = 4"},
      {"pipeline/interleaved", 2, 2, {{"layers", 6}}, "--layers 6 must be divisible by pp*v = 2*2 = 4"},
      {"pipeline/zb-h1", 4, 1, {{"microbatches", 2}}, "--microbatches 2 must be at least --pp 4 for schedule zb-h1"},
      {"pipeline/interleaved", 4, 2, {{"microbatches", 6}}, "--microbatches 6 must be divisible by --pp 4"},
      {"pipeline/zb-v", 2, 3, {}, "--vpp 3 must be 2 for schedule zb-v"},
      {"pipeline", 2, 1, {{"schedule", "pipedream"}}, "--set schedule 'pipedream' must be one of gpipe, 1f1b"},
      {"pipeline", 2, 1, {{"schedule", "csv"}}, "--set schedule=csv needs --set schedule_file=PATH"},
      {"pipeline", 2, 1, {{"schedule_file", "/nonexistent.csv"}}, "--set schedule_file=/nonexistent.csv is not a"},
  };
  Registry r = suite_registry("pipeline");
  for (const Bad& b : bad) {
    RunOptions o = small();
    o.rank_counts.clear();
    o.selection = {b.selection};
    o.options = b.options;
    o.parallel = ParallelConfig{};
    o.parallel->pp = b.pp;
    o.parallel->vpp = b.vpp;
    o.vpp_given = true;
    EXPECT_THROW(
        {
          try {
            plan_run(r, o, b.pp);
          } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find(b.message), std::string::npos) << e.what();
            throw;
          }
        },
        UsageError)
        << b.message;
  }
  // TP inside the stages: --tp must divide --ffn.
  RunOptions o = small();
  o.rank_counts.clear();
  o.selection = {"pipeline/1f1b"};
  o.options = {{"ffn", 30}};
  o.parallel = ParallelConfig{};
  o.parallel->tp = 4;
  o.parallel->pp = 2;
  EXPECT_THROW(plan_run(r, o, 8), UsageError);
}

// The trace lands next to the results and opens as Chrome trace JSON.
void expect_trace_files(const std::vector<CaseRecord>& records, const std::string& dir) {
  ASSERT_FALSE(records.empty());
  for (const CaseRecord& r : records) {
    const std::string path = r.metrics.at("trace_file").get<std::string>();
    EXPECT_EQ(std::filesystem::path(path).parent_path(), std::filesystem::path(dir));
    nlohmann::json trace = nlohmann::json::parse(std::ifstream(path));
    size_t actions = 0;
    for (const auto& e : trace.at("traceEvents")) actions += e.at("ph") == "X";
    const size_t stages = static_cast<size_t>(r.config.parallel.pp);       // zb-h1: one stage per rank
    EXPECT_EQ(actions, 3 * stages * microbatches_of(r)) << r.config.id();  // F, I and W of each
  }
}

TEST(Pipeline, WritesAChromeTraceNextToTheResults) {
  const std::string dir = (std::filesystem::temp_directory_path() / "pipeline_test_traces").string();
  if (world().rank() == 0) std::filesystem::create_directories(dir);
  world().barrier();
  RunOptions o = small();
  o.selection = {"pipeline/zb-h1"};
  o.options["microbatches"] = 4;
  o.trace_dir = dir;
  std::vector<CaseRecord> records = run_suite("pipeline", o);
  if (world().rank() == 0) {
    expect_trace_files(records, dir);
    std::filesystem::remove_all(dir);
  }
  world().barrier();
}

}  // namespace
}  // namespace sextant
