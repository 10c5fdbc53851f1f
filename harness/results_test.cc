// Where results and JUnit go: probes that really write, and names that never
// replace another run's file.
#include "harness/results.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "harness/error.h"
#include "harness/strings.h"

namespace fs = std::filesystem;

namespace sextant {
namespace {

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / cat("sextant-results-test-", getpid())) { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

nlohmann::json doc(const std::string& run_id) {
  nlohmann::json c = {{"suite", "toy"},
                      {"id", "toy/sum ranks=1"},
                      {"conformance", {{"status", "fail"}, {"failures", {"sum: 3 wrong"}}}},
                      {"perf", {{"time", nlohmann::json::object()}, {"metrics", nlohmann::json::object()}}}};
  return results_document({{"id", run_id}, {"start", "2026-01-02T03:04:05Z"}}, {}, nlohmann::json::array({c}));
}

TEST(Results, ProbesRejectWhatCannotBeWritten) {
  try {
    require_writable_dir("/proc", "--out");
    FAIL() << "/proc accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--out '/proc' is not writable"), std::string::npos) << e.what();
  }
  EXPECT_THROW(require_writable_junit("/proc/x.xml"), UsageError);
  EXPECT_THROW(require_writable_junit("/proc/"), UsageError);
  TempDir dir;
  EXPECT_NO_THROW(require_writable_dir((dir.path / "new").string(), "--out"));
  EXPECT_NO_THROW(require_writable_junit((dir.path / "j.xml").string()));
  EXPECT_FALSE(fs::exists(dir.path / "new")) << "the probe leaves nothing behind, not even the folder";
  fs::create_directories(dir.path / "old");
  EXPECT_NO_THROW(require_writable_dir((dir.path / "old").string(), "--out"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path / "old"), fs::directory_iterator{}), 0)
      << "the probe file is removed";
}

TEST(Results, NamesFollowTheRunIdAndNeverReplaceAFile) {
  TempDir dir;
  const nlohmann::json d = doc("2026-01-02T03:04:05Z-host-42");
  const std::string base = results_base(dir.path.string(), "2026-01-02T03:04:05Z-host-42");
  EXPECT_EQ(base, (dir.path / "sextant-2026-01-02T03-04-05Z-host-42").string());
  EXPECT_EQ(write_results(d, dir.path.string()), base + ".json");
  EXPECT_EQ(write_results(d, dir.path.string()), base + "-1.json");
}

TEST(Results, JunitInAFolderOrUnderAFreeName) {
  TempDir dir;
  const nlohmann::json first = doc("2026-01-02T03:04:05Z-host-42"), second = doc("2026-01-02T03:04:06Z-host-43");
  const std::string folder = dir.path.string() + "/";
  EXPECT_EQ(write_junit(first, folder), folder + "sextant-2026-01-02T03-04-05Z-host-42.xml");
  const std::string named = (dir.path / "junit.xml").string();
  EXPECT_EQ(write_junit(first, named), named);
  EXPECT_EQ(write_junit(second, named), (dir.path / "junit-2026-01-02T03-04-06Z-host-43.xml").string())
      << "a second run with the same --junit gets its own file";
  std::ifstream in(named);
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find("failures=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("sum: 3 wrong"), std::string::npos) << xml;
}

TEST(Results, ASuspectLineSaysWhereAndWhy) {
  nlohmann::json link = {
      {"kind", "slow_link"}, {"ranks", {1, 3}},      {"host", "a<->b"},      {"figure", "p2p_bandwidth_GBps"},
      {"value", 0.25},       {"class", "same_node"}, {"class_median", 10.0}, {"rule", "below 0.2 x"}};
  EXPECT_EQ(describe_suspect(link),
            "slow_link ranks 1<->3 (host a<->b): p2p_bandwidth_GBps 0.25 against the same_node median 10; rule: below "
            "0.2 x");
  link.update({{"retested", true}, {"tournament_value", 0.5}});
  EXPECT_EQ(describe_suspect(link),
            "slow_link ranks 1<->3 (host a<->b): p2p_bandwidth_GBps 0.25 against the same_node median 10 (measured "
            "alone; 0.5 in its round); rule: below 0.2 x");
}

}  // namespace
}  // namespace sextant
