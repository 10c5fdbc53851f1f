// `sextant run`: plan, check every output location, run each case under the
// watchdog with its record journaled as it finishes, and write the results;
// or, when the run cannot finish, an incomplete results file from the journal.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli.h"

namespace sextant {

// Adds `--resume FILE` to the `run` subcommand and the help footer on
// timeouts, interrupted runs and exit codes.
void add_interruption_options(CLI::App& run, std::string& resume);

// Judges the complete results before they are written (world rank 0): may
// add to the document and returns the run's exit status. results_base is
// where the results go without extension ("" with --no-results).
using ResultsJudge = std::function<int(nlohmann::json& doc, const std::string& results_base)>;

// Runs it (collective over the world); returns the exit code: by the cases,
// or what `judge` says (sextant qualify). `header` is printed on world rank 0
// (unless --quiet) once every flag and output path is validated, so a
// refused run prints its one error line alone.
int run_command(const RunFlags& flags, const std::string& resume, const std::string& command_line,
                const ResultsJudge& judge = {}, const std::string& header = "");

}  // namespace sextant
