#include "app/recover_command.h"

#include <mpi.h>

#include <filesystem>
#include <iostream>

#include "harness/error.h"
#include "harness/journal.h"
#include "harness/results.h"
#include "harness/strings.h"

namespace sextant {

namespace {

struct RecoverFlags {
  std::string journal, junit;
};
RecoverFlags flags;

}  // namespace

CLI::App* add_recover_command(CLI::App& app) {
  CLI::App* recover = app.add_subcommand(
      "recover", "Write the incomplete results of a run that ended without writing them, from its journal");
  recover->add_option("journal", flags.journal, "The run's journal (OUT/sextant-<run id>.journal)")->required();
  recover->add_option("--junit", flags.junit,
                      "Also write JUnit XML here (default: where the run was asked to write it, if it was); "
                      "a folder or a file name, never over another file, as in 'sextant run --junit'");
  recover->footer(
      "The results file is written beside the journal, named like it (.json), with run.complete false and\n"
      "run.incomplete_reason; the journal stays. Resume the run with 'sextant run ... --resume FILE'.");
  return recover;
}

int run_recover_command() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return 0;
  const std::string option = "recover JOURNAL";
  require(flags.journal.size() > 8 && flags.journal.rfind(".journal") == flags.journal.size() - 8,
          cat(option, " '", flags.journal, "' must be a journal (a file ending in .journal)"));
  const RunSnapshot snapshot = read_journal(flags.journal, option);
  const std::string junit = flags.junit.empty() ? snapshot.junit : flags.junit;
  const std::string folder = std::filesystem::path(flags.journal).parent_path().string();
  require_writable_dir(folder.empty() ? "." : folder, option);
  if (!junit.empty()) require_writable_junit(junit);
  WrittenFiles files = write_incomplete_results(
      flags.journal, "recovered from the journal: the run ended before writing its results (e.g. rank 0 was killed)",
      junit);
  std::cout << "# " << snapshot.cases.size() << " finished cases\n# results: " << files.results << "\n";
  if (!files.junit.empty()) std::cout << "# junit: " << files.junit << "\n";
  return 0;
}

}  // namespace sextant
