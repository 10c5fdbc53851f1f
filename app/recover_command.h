// `sextant recover JOURNAL`: the incomplete results file (and JUnit) of a run
// that ended without writing them, e.g. because rank 0 itself was killed.
#pragma once

#include <CLI/CLI.hpp>

namespace sextant {

// Registers the subcommand; returns it so the caller can test parsed().
CLI::App* add_recover_command(CLI::App& app);
// Runs it (rank 0 works); returns the exit code.
int run_recover_command();

}  // namespace sextant
