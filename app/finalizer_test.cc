// The end of a run is written once: complete, or abandoned from the journal;
// and a SIGTERM abandons the run, then ends the process with SIGTERM.
#include "app/finalizer.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "harness/journal.h"
#include "harness/strings.h"

namespace fs = std::filesystem;

namespace sextant {
namespace {

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / cat("sextant-finalizer-test-", getpid())) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// A journal with one finished case; returns its path.
std::string journal_in(const fs::path& dir) {
  nlohmann::json run = {{"id", "2026-01-02T03:04:05Z-host-42"},
                        {"start", "2026-01-02T03:04:05Z"},
                        {"end", "2026-01-02T03:04:05Z"},
                        {"command", "sextant run"},
                        {"git_sha", "abc"},
                        {"version", "0.1.0"}};
  Journal j((dir / "sextant-run").string(), {{"run", run}, {"system", nlohmann::json::object()}, {"junit", ""}});
  j.append_case({{"suite", "toy"}, {"id", "toy/sum"}, {"conformance", {{"status", "pass"}}}});
  return j.path();
}

nlohmann::json results_in(const fs::path& dir) {
  return nlohmann::json::parse(std::ifstream(dir / "sextant-run.json"));
}

TEST(RunFinalizer, AbandonWritesTheJournalAsIncompleteResultsOnce) {
  TempDir dir;
  RunFinalizer f;
  f.attach(journal_in(dir.path), "");
  f.abandon("timeout: rank 1 stopped");
  f.abandon("a second reason changes nothing");
  nlohmann::json doc = results_in(dir.path);
  EXPECT_EQ(doc["run"]["complete"], false);
  EXPECT_EQ(doc["run"]["incomplete_reason"], "timeout: rank 1 stopped");
  EXPECT_EQ(doc["cases"].size(), 1u);
  EXPECT_FALSE(fs::exists(dir.path / "sextant-run.journal")) << "the results hold what the journal did";
  EXPECT_FALSE(f.complete([] { ADD_FAILURE() << "a complete write after the run was abandoned"; }));
}

TEST(RunFinalizer, AfterCompletionAbandonWritesNothing) {
  TempDir dir;
  RunFinalizer f;
  f.attach(journal_in(dir.path), "");
  bool wrote = false;
  EXPECT_TRUE(f.complete([&] { wrote = true; }));
  EXPECT_TRUE(wrote);
  f.abandon("SIGTERM while finishing");
  EXPECT_FALSE(fs::exists(dir.path / "sextant-run.json"));
}

TEST(TerminationHandler, SigtermAbandonsTheRunThenEndsTheProcessWithSigterm) {
  TempDir dir;
  const std::string journal = journal_in(dir.path);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RunFinalizer f;
    f.attach(journal, "");
    TerminationHandler handler([&f](const char* name) { f.abandon(cat("terminated by ", name)); });
    raise(SIGTERM);
    for (;;) pause();  // the handler's thread ends the process
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(results_in(dir.path)["run"]["incomplete_reason"], "terminated by SIGTERM");
}

}  // namespace
}  // namespace sextant
