// The journal: appended lines read back, a torn last line ignored, and an
// abandoned run turned into an incomplete results document.
#include "harness/journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "harness/error.h"
#include "harness/results.h"
#include "harness/strings.h"

namespace fs = std::filesystem;

namespace sextant {
namespace {

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / cat("sextant-journal-test-", getpid())) { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

nlohmann::json header() {
  return {{"run",
           {{"id", "2026-01-02T03:04:05Z-host-42"},
            {"start", "2026-01-02T03:04:05Z"},
            {"end", "2026-01-02T03:04:05Z"},
            {"command", "sextant run"},
            {"git_sha", "abc"},
            {"version", "0.1.0"}}},
          {"system", {{"world_size", 2}}},
          {"plan", {{"world_size", 2}, {"cases", 3}}},
          {"junit", ""}};
}

nlohmann::json record(const std::string& id, const std::string& status) {
  return {{"suite", "toy"},
          {"id", id},
          {"conformance", {{"status", status}, {"failures", nlohmann::json::array()}}},
          {"perf", {{"time", nlohmann::json::object()}, {"metrics", nlohmann::json::object()}}}};
}

TEST(Journal, ReadsBackWhatWasAppended) {
  TempDir dir;
  Journal j((dir.path / "run").string(), header());
  EXPECT_EQ(j.path(), (dir.path / "run.journal").string());
  EXPECT_EQ(j.base(), (dir.path / "run").string());
  j.append_case(record("a", "pass"));
  j.append_case(record("b", "fail"));
  RunSnapshot s = read_journal(j.path(), "--resume");
  EXPECT_EQ(s.run["id"], "2026-01-02T03:04:05Z-host-42");
  EXPECT_EQ(s.plan["cases"], 3);
  ASSERT_EQ(s.cases.size(), 2u);
  EXPECT_EQ(s.cases[1]["id"], "b");
  EXPECT_FALSE(s.complete);
}

TEST(Journal, NeverOpensAnExistingFile) {
  TempDir dir;
  Journal first((dir.path / "run").string(), header());
  Journal second((dir.path / "run").string(), header());
  EXPECT_EQ(second.path(), (dir.path / "run-1.journal").string());
}

TEST(Journal, IgnoresATornLastLineAndRejectsOtherDamage) {
  TempDir dir;
  std::string path;
  {
    Journal j((dir.path / "run").string(), header());
    j.append_case(record("a", "pass"));
    path = j.path();
  }
  std::ofstream(path, std::ios::app) << "{\"case\": {\"suite\": \"to";  // died while writing
  EXPECT_EQ(read_journal(path, "--resume").cases.size(), 1u);

  std::ofstream(path, std::ios::app) << "\n{\"case\": {}}\n";  // the torn line is now in the middle
  EXPECT_THROW(read_journal(path, "--resume"), UsageError);

  std::ofstream(dir.path / "other.journal") << "{\"schema\": \"sextant.result/1\"}\n";
  try {
    read_journal((dir.path / "other.journal").string(), "--resume");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--resume '"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is not a sextant journal"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_journal((dir.path / "missing").string(), "--resume"), UsageError);
}

TEST(Journal, BecomesAnIncompleteResultsFile) {
  TempDir dir;
  std::string path;
  {
    Journal j((dir.path / "sextant-run").string(), header());
    j.append_case(record("a", "pass"));
    j.append_case(record("b", "fail"));
    path = j.path();
  }
  WrittenFiles files = write_incomplete_results(path, "timeout: rank 1 stopped", (dir.path / "junit.xml").string());
  EXPECT_EQ(files.results, (dir.path / "sextant-run.json").string());
  EXPECT_EQ(files.junit, (dir.path / "junit.xml").string());
  RunSnapshot s = read_run_file(files.results, "--resume");
  EXPECT_FALSE(s.complete);
  EXPECT_EQ(s.run["incomplete_reason"], "timeout: rank 1 stopped");
  EXPECT_EQ(s.run["summary"]["cases"], 2);
  EXPECT_EQ(s.run["summary"]["pass"], 1);
  EXPECT_EQ(s.run["summary"]["fail"], 1);
  EXPECT_EQ(s.plan["cases"], 3) << "the plan travels into run.plan, for --resume";
  EXPECT_EQ(s.cases.size(), 2u);
  EXPECT_TRUE(fs::exists(path)) << "the caller decides when the journal goes";
  std::ifstream in(files.junit);
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find("name=\"run complete\" time=\"0\"><error message=\"timeout: rank 1 stopped\""), std::string::npos)
      << xml;
  EXPECT_THROW(write_incomplete_results(files.results, "x", ""), UsageError) << "not a .journal";
}

}  // namespace
}  // namespace sextant
