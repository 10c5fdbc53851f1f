#include "app/qualify_criteria.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "harness/error.h"

namespace sextant::qualify {
namespace {

namespace fs = std::filesystem;
const std::string kShipped = std::string(SEXTANT_SOURCE_DIR) + "/results/expectations";

// A passing case record with the fields the criteria read.
nlohmann::json record(const std::string& suite, const std::string& name, nlohmann::json params, nlohmann::json metrics,
                      int ranks = 2, const std::string& dtype = "f32", double seconds = 1e-3) {
  return {{"suite", suite},
          {"case", name},
          {"id", suite + "/" + name + " " + params.dump()},
          {"params", params},
          {"parallel", {{"tp", 1}, {"pp", params.value("pp", 1)}}},
          {"ranks", ranks},
          {"dtype", dtype},
          {"fault", nullptr},
          {"conformance", {{"status", "pass"}}},
          {"perf", {{"time", {{"run", {{"median", seconds}}}}}, {"metrics", metrics}}}};
}

nlohmann::json value(double v) { return {{"value", v}, {"unit", "x"}}; }

nlohmann::json collective(const std::string& op, int64_t bytes, double busbw, int nodes, int group = 2,
                          double seconds = 1e-3) {
  return record("collectives", op, {{"bytes", bytes}, {"group_size", group}},
                {{"busbw_GBps", value(busbw)}, {"group_nodes", value(nodes)}}, group, "f32", seconds);
}

std::string write_temp(const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("sextant-expect-" + std::to_string(::getpid()) + ".toml");
  std::ofstream(p) << text;
  return p.string();
}

TEST(Expectations, ShippedFilesParseAndCite) {
  for (const char* file : {"h100.toml", "h200.toml", "host.toml"}) {
    const Expectations e = read_expectations(kShipped + "/" + file);
    EXPECT_FALSE(e.thresholds.empty()) << file;
    for (const auto& [name, t] : e.thresholds) EXPECT_FALSE(t.source.empty()) << file << " " << name;
  }
  const Expectations h200 = read_expectations(kShipped + "/h200.toml");
  EXPECT_DOUBLE_EQ(h200.thresholds.at("all_reduce_busbw_intra_GBps").value, 0.85 * 450);
  EXPECT_NE(h200.thresholds.at("all_reduce_busbw_intra_GBps").source.find("NVIDIA H200 datasheet"), std::string::npos);
  EXPECT_EQ(*h200.suspect_rules.at("p2p_bandwidth").min_effect, 0.25);
}

TEST(Expectations, MatchedByDeviceName) {
  EXPECT_EQ(fs::path(expectations_for("NVIDIA H200", kShipped)).filename(), "h200.toml");
  EXPECT_EQ(fs::path(expectations_for("NVIDIA H100 80GB HBM3", kShipped)).filename(), "h100.toml");
  EXPECT_EQ(fs::path(expectations_for("host", kShipped)).filename(), "host.toml");
  EXPECT_THROW(expectations_for("Some Other GPU", kShipped), UsageError);
}

// One line naming the key and the rule for each mistake.
TEST(Expectations, BadFilesAreRefused) {
  const std::string head = "schema = \"sextant.expectations/1\"\nname = \"x\"\nversion = \"1\"\n";
  auto error = [&](const std::string& body) {
    const std::string path = write_temp(head + body);
    try {
      read_expectations(path);
    } catch (const UsageError& e) {
      fs::remove(path);
      return std::string(e.what());
    }
    fs::remove(path);
    return std::string("no error");
  };
  EXPECT_NE(error("[criteria.all_reduce_busbw_intra_gbps]\nthreshold = 1\n").find("did you mean"), std::string::npos);
  EXPECT_NE(error("[criteria.gemm_tflops]\nthreshold = 1\nfraction = 0.5\nof = \"p\"\n").find("either threshold"),
            std::string::npos);
  EXPECT_NE(error("[peaks.p]\nvalue = 3\n[criteria.gemm_tflops]\nfraction = 0.5\nof = \"p\"\n").find("must cite"),
            std::string::npos);
  EXPECT_NE(error("[criteria.gemm_tflops]\nfraction = 0.5\nof = \"nope\"\n").find("names no [peaks.nope]"),
            std::string::npos);
  EXPECT_NE(error("[criteria.gemm_tflops]\nthreshold = -1\n").find("at least 0"), std::string::npos);
  EXPECT_NE(error("colour = 3\n[criteria.gemm_tflops]\nthreshold = 1\n").find("unknown key 'colour'"),
            std::string::npos);
  EXPECT_NE(error("[criteria.gemm_tflops\n").find("line 4"), std::string::npos);
  const std::string criterion = "[criteria.gemm_tflops]\nthreshold = 1\n";
  EXPECT_NE(error(criterion + "[suspects.tflop]\nmin_effect = 0.3\nnote = \"x\"\n").find("did you mean 'tflops'"),
            std::string::npos);
  EXPECT_NE(error(criterion + "[suspects.tflops]\nmin_effect = 0.3\n").find("note must say why"), std::string::npos);
  EXPECT_NE(error(criterion + "[suspects.tflops]\nmin_effect = 1.5\nnote = \"x\"\n").find("[0.01, 0.99]"),
            std::string::npos);
  EXPECT_NE(error(criterion + "[suspects.tflops]\nnote = \"x\"\n").find("min_effect or mad_k"), std::string::npos);
  EXPECT_NE(error(criterion + "[suspects.tflops]\nmad_k = 3\nnote = \"x\"\nmin = 2\n").find("unknown key 'min'"),
            std::string::npos);
}

TEST(Expectations, SuspectRulesBecomeTheScreensOptionsUnlessTheUserSetThem) {
  const std::string path = write_temp(
      "schema = \"sextant.expectations/1\"\nname = \"x\"\nversion = \"1\"\n[criteria.gemm_tflops]\nthreshold = "
      "1\n[suspects.p2p_bandwidth]\nmin_effect = 0.25\nnote = \"one NVSwitch path per pair\"\n"
      "[suspects.tflops]\nmin_effect = 0.1\nmad_k = 4\nnote = \"one SKU\"\n");
  const Expectations e = read_expectations(path);
  fs::remove(path);
  ASSERT_EQ(e.suspect_rules.size(), 2u);
  EXPECT_EQ(*e.suspect_rules.at("p2p_bandwidth").min_effect, 0.25);
  EXPECT_FALSE(e.suspect_rules.at("p2p_bandwidth").mad_k.has_value());
  using Settings = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(suspect_rule_settings(e, {}),
            (Settings{{"p2p_bandwidth_effect", 0.25}, {"tflops_effect", 0.1}, {"tflops_mad_k", 4}}));
  EXPECT_EQ(suspect_rule_settings(e, {"tflops_mad_k"}),
            (Settings{{"p2p_bandwidth_effect", 0.25}, {"tflops_effect", 0.1}}));
  // The verdict's rules: the file's where it sets one, the user's --set over it, else the table's.
  const nlohmann::json rules = suspect_rules_json(e, Device::cuda, {{"tflops_effect", 0.2}});
  std::map<std::string, nlohmann::json> by_key;
  for (const nlohmann::json& r : rules) by_key[r["key"]] = r;
  EXPECT_EQ(by_key.size(), 4u);
  EXPECT_EQ(by_key["p2p_bandwidth"]["min_effect"], 0.25);
  EXPECT_NE(by_key["p2p_bandwidth"]["source"].get<std::string>().find("one NVSwitch path per pair"), std::string::npos);
  EXPECT_EQ(by_key["tflops"]["min_effect"], 0.2);
  EXPECT_EQ(by_key["tflops"]["mad_k"], 4);
  EXPECT_NE(by_key["tflops"]["source"].get<std::string>().find("--set tflops_effect"), std::string::npos);
  EXPECT_EQ(by_key["node_busbw"]["source"].get<std::string>().rfind("rule table: ", 0), 0u);
}

nlohmann::json results(nlohmann::json cases) {
  return {{"run", {{"id", "r1"}, {"start", "2026-12-01T00:00:00Z"}}}, {"cases", cases}};
}

TEST(Judge, PassFailAndNotMeasured) {
  nlohmann::json cases = nlohmann::json::array();
  cases.push_back(collective("all_reduce", 1024, 1.0, 1));
  cases.push_back(collective("all_reduce", 1 << 20, 5.0, 1));      // the largest message decides
  cases.push_back(collective("all_reduce", 1 << 20, 50.0, 1, 1));  // a group of one does not count
  cases.push_back(collective("sendrecv", 1024, 0.1, 1, 2, 20e-6));
  cases.push_back(collective("sendrecv", 4096, 0.2, 1, 2, 30e-6));
  cases.push_back(record("ops", "gemm", {{"m", 64}}, {{"gflops", value(2000)}}, 1, "f32"));
  cases.push_back(record("ops", "gemm", {{"m", 64}}, {{"gflops", value(9000)}}, 1, "bf16"));  // not the f32 figure
  Expectations e;
  e.path = "test";
  e.dtypes = {"f32", "f32"};
  e.thresholds["all_reduce_busbw_intra_GBps"] = {4.0, "test"};
  e.thresholds["p2p_latency_intra_us"] = {10.0, "test"};
  e.thresholds["gemm_tflops"] = {1.0, "test"};
  e.thresholds["all_reduce_busbw_inter_GBps"] = {4.0, "test"};
  const Verdict v = judge(results(cases), e);
  std::map<std::string, Outcome> by;
  for (const Outcome& o : v.outcomes) by[o.criterion->name] = o;
  EXPECT_EQ(by["conformance"].status, "PASS");
  EXPECT_EQ(by["all_reduce_busbw_intra_GBps"].status, "PASS");
  EXPECT_DOUBLE_EQ(*by["all_reduce_busbw_intra_GBps"].measured, 5.0);
  EXPECT_DOUBLE_EQ(*by["all_reduce_busbw_intra_GBps"].margin_pct, 25.0);
  EXPECT_EQ(by["p2p_latency_intra_us"].status, "FAIL");  // 20 us at the smallest message > 10
  EXPECT_NEAR(*by["p2p_latency_intra_us"].measured, 20.0, 1e-9);
  EXPECT_DOUBLE_EQ(*by["gemm_tflops"].measured, 2.0);
  EXPECT_EQ(by["all_reduce_busbw_inter_GBps"].status, "NOT MEASURED");
  EXPECT_NE(by["all_reduce_busbw_inter_GBps"].note.find("one node"), std::string::npos);
  EXPECT_EQ(by["step_mfu"].status, "NOT MEASURED");
  EXPECT_FALSE(v.pass);  // the latency failed

  const nlohmann::json q = to_json(v, e);
  EXPECT_EQ(q["verdict"], "FAIL");
  EXPECT_EQ(q["counts"]["fail"], 1);
  const std::string table = verdict_table(q);
  EXPECT_NE(table.find("p2p_latency_intra_us"), std::string::npos);
  nlohmann::json doc = results(cases);
  doc["qualification"] = q;
  doc["system"] = {{"world_size", 2}, {"ranks_per_node", 2}};
  EXPECT_NE(verdict_html(doc).find("class=FAIL"), std::string::npos);
}

// A failed or errored case fails the cluster, whatever the figures say.
TEST(Judge, ConformanceFailsTheCluster) {
  nlohmann::json bad = collective("all_reduce", 1 << 20, 5.0, 1);
  bad["conformance"]["status"] = "fail";
  nlohmann::json errored = collective("all_gather", 1 << 20, 5.0, 1);
  errored["error"] = "rank 1 setup: out of memory";
  const Verdict v = judge(results({bad, errored, collective("all_reduce", 1 << 20, 5.0, 2)}), Expectations{});
  EXPECT_EQ(v.outcomes.front().criterion->name, "conformance");
  EXPECT_EQ(v.outcomes.front().status, "FAIL");
  EXPECT_DOUBLE_EQ(*v.outcomes.front().measured, 2);
  EXPECT_FALSE(v.pass);
}

// Two nodes: the inter-node kind, and the bubble gap of the worst schedule.
TEST(Judge, InterNodeAndBubbleGap) {
  nlohmann::json pipe = record("pipeline", "1f1b", {{"pp", 2}},
                               {{"bubble_measured_mean", value(0.30)}, {"bubble_simulated", value(0.25)}}, 2);
  nlohmann::json worse = record("pipeline", "gpipe", {{"pp", 2}},
                                {{"bubble_measured_mean", value(0.40)}, {"bubble_simulated", value(0.20)}}, 2);
  Expectations e;
  e.thresholds["pipeline_bubble_gap"] = {0.1, "test"};
  e.thresholds["all_reduce_busbw_inter_GBps"] = {1.0, "test"};
  const Verdict v = judge(results({pipe, worse, collective("all_reduce", 1 << 20, 3.0, 2, 4)}), e);
  for (const Outcome& o : v.outcomes) {
    if (o.criterion->name == "pipeline_bubble_gap") {
      EXPECT_NEAR(*o.measured, 0.125, 1e-12);  // the median of 0.05 and 0.20
      EXPECT_EQ(o.status, "FAIL");
    }
    if (o.criterion->name == "all_reduce_busbw_inter_GBps") {
      EXPECT_EQ(o.status, "PASS");
    }
  }
}

TEST(Baseline, ThresholdsFromAGoldenRun) {
  const nlohmann::json golden =
      results({collective("all_reduce", 1 << 20, 10.0, 1), collective("sendrecv", 1024, 0.1, 1, 2, 20e-6)});
  Expectations file;
  file.thresholds["gemm_tflops"] = {1.0, "file"};
  const Expectations e = baseline_expectations(golden, "golden.json", 0.10, file);
  EXPECT_DOUBLE_EQ(e.thresholds.at("all_reduce_busbw_intra_GBps").value, 9.0);
  EXPECT_NEAR(e.thresholds.at("p2p_latency_intra_us").value, 22.0, 1e-9);
  EXPECT_DOUBLE_EQ(e.thresholds.at("gemm_tflops").value, 1.0);  // not in the golden run: the file's
  EXPECT_FALSE(e.thresholds.count("conformance"));
}

}  // namespace
}  // namespace sextant::qualify
