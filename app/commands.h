// The kernel communicator of a run: `run --comm` and the factory it selects.
#pragma once

#include <CLI/CLI.hpp>

#include "harness/runner.h"

namespace sextant {

// Kernel communicators for --device (empty for the host: MPI itself).
CommFactory make_comm_factory(Device device);
// The backend make_comm_factory chose: "mpi", "nccl" or "mpi-staged".
std::string chosen_comm_backend();
// Adds --comm (auto, nccl, staged) to the app's `run` subcommand, or to `sub`.
void add_comm_option(CLI::App& app);
void add_comm_option_to(CLI::App& sub);

}  // namespace sextant
