// `sextant run`: plan, check every output location, run each case under the
// watchdog with its record journaled as it finishes, and write the results;
// or, when the run cannot finish, an incomplete results file from the journal.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "harness/cli.h"

namespace sextant {

// Adds `--resume FILE` to the `run` subcommand and the help footer on
// timeouts, interrupted runs and exit codes.
void add_interruption_options(CLI::App& run, std::string& resume);

// Runs it (collective over the world); returns the exit code.
int run_command(const RunFlags& flags, const std::string& resume, const std::string& command_line);

}  // namespace sextant
