// Hooks the entry point calls into: the communicator factory for GPU runs and
// subcommands beyond list/run (e.g. `plan`).
#pragma once

#include <CLI/CLI.hpp>

#include "harness/runner.h"

namespace sextant {

// Kernel communicators for --device (empty for the host: MPI itself).
CommFactory make_comm_factory(Device device);
// The backend make_comm_factory chose: "mpi", "nccl" or "mpi-staged".
std::string chosen_comm_backend();
// Registers further subcommands on the app.
void add_extra_commands(CLI::App& app);
// Runs whichever extra subcommand was parsed; returns its exit code.
int run_extra_command(CLI::App& app);

}  // namespace sextant
