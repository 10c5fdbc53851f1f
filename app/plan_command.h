// `sextant plan`: list valid parallel configs for a model on a cluster with
// estimated memory, step time and MFU (kernels/planner/planner.h).
#pragma once

#include <CLI/CLI.hpp>

namespace sextant {

// Registers the subcommand; returns it so the caller can test parsed().
CLI::App* add_plan_command(CLI::App& app);
// Runs it (rank 0 prints); returns the exit code.
int run_plan_command();

}  // namespace sextant
