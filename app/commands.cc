#include "app/commands.h"

#include <mpi.h>

#include "harness/comm_staged.h"
#include "harness/error.h"
#include "harness/gpu_binding.h"
#include "harness/strings.h"
#if defined(SEXTANT_HAVE_CUDA)
#include "harness/comm_nccl.h"
#endif

namespace sextant {

namespace {

// `run --comm`: which kernel communicator GPU runs use, as given (CLI11
// checks it is one of the names) and as meant.
enum class CommChoice { automatic, nccl, staged };
std::string& comm_text() {
  static std::string text = "auto";
  return text;
}
CommChoice comm_choice() {
  return find_named<CommChoice>(
             {{"auto", CommChoice::automatic}, {"nccl", CommChoice::nccl}, {"staged", CommChoice::staged}}, comm_text())
      .value_or(CommChoice::automatic);
}
// What make_comm_factory picked (the results' system.backend).
std::string& chosen() {
  static std::string backend = "mpi";
  return backend;
}

constexpr const char* kCommHelp =
    "Kernel communicator for --device cuda: auto (default) picks nccl when every rank has a GPU of its own "
    "(ranks per node <= visible GPUs, GPUs told apart by UUID) and staged otherwise; nccl (one process per GPU, "
    "communication on its own stream overlapping compute); staged (MPI moves device buffers through host memory, "
    "so several ranks can share one GPU; timings are labeled not representative; with --device host it stages "
    "through host memory, a test of that path on machines without GPUs)";

CommFactory nccl_factory() {
#if defined(SEXTANT_HAVE_CUDA)
  chosen() = "nccl";
  return [](MpiCommunicator& group) -> std::unique_ptr<Communicator> { return NcclCommunicator::create(group); };
#else
  throw UsageError("--comm nccl needs a CUDA build");
#endif
}

CommFactory staged_factory(Device device) {
  chosen() = "mpi-staged";
  auto memory = device == Device::cuda ? cuda_staging() : host_staging();
  return [memory](MpiCommunicator& group) -> std::unique_ptr<Communicator> {
    return StagedCommunicator::create(group, memory);
  };
}

}  // namespace

CommFactory make_comm_factory(Device device) {
  const CommChoice choice = comm_choice();
  if (device == Device::host) {
    require(choice != CommChoice::nccl,
            "--comm nccl needs --device cuda (host runs use MPI, or staged to test that path)");
    return choice == CommChoice::staged ? staged_factory(device) : CommFactory{};
  }
  // Collective over the world: every rank binds its GPU and all reach the same choice.
  GpuBinding gpus = bind_gpus(MPI_COMM_WORLD);
  if (choice == CommChoice::staged) return staged_factory(device);
  if (choice == CommChoice::nccl) {
    require(!gpus.shared, cat("--comm nccl needs one GPU per rank: ", gpus.ranks_per_node, " ranks per node share ",
                              gpus.visible_gpus, " visible GPU", gpus.visible_gpus == 1 ? "" : "s",
                              " (use --comm staged, or fewer ranks)"));
    return nccl_factory();
  }
  return gpus.shared ? staged_factory(device) : nccl_factory();
}

std::string chosen_comm_backend() { return chosen(); }

void add_comm_option(CLI::App& app) { add_comm_option_to(*app.get_subcommand("run")); }

void add_comm_option_to(CLI::App& sub) {
  sub.add_option("--comm", comm_text(), kCommHelp)
      ->check(CLI::IsMember({"auto", "nccl", "staged"}))
      ->group("Where and how");
}

}  // namespace sextant
