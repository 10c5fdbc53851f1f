// sextant: the command-line entry point. Owns process-level policy: MPI
// start-up, exit codes (0 all pass, 1 a case failed, 2 bad input), the
// per-case watchdog, and where output goes. Everything else is library code.
#include <cblas.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "app/commands.h"
#include "app/plan_command.h"
#include "harness/blas.h"
#include "harness/cli.h"
#include "harness/device.h"
#include "harness/error.h"
#include "harness/results.h"
#include "harness/runner.h"
#include "harness/strings.h"
#include "harness/table.h"
#include "harness/version.h"

using namespace sextant;

namespace {

// Aborts the whole MPI job when one case runs longer than the limit: a hung
// collective must fail loudly, not hang CI.
class Watchdog {
 public:
  // limit_s: infinity for no timeout.
  explicit Watchdog(double limit_s) : limit_(limit_s), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(const std::string& what) {
    if (!std::isfinite(limit_)) return;
    std::lock_guard lock(mutex_);
    what_ = what;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(limit_));
    armed_ = true;
  }
  void disarm() {
    std::lock_guard lock(mutex_);
    armed_ = false;
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
      if (armed_ && std::chrono::steady_clock::now() > deadline_) {
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        std::fprintf(stderr, "sextant: rank %d: '%s' exceeded --timeout %.0f s; aborting the run\n", rank,
                     what_.c_str(), limit_);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 3);
      }
    }
  }
  double limit_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false, armed_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

int ranks_per_node() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 1;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n;
}

// Memory the kernel may still hand out (MemAvailable), or 0 when unknown.
double available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

int do_run(const RunFlags& flags, const std::string& cmdline) {
  auto world = MpiCommunicator::world();
  const bool root = world->rank() == 0;
  const std::string start = iso_time_now();
  RunOptions options = to_run_options(flags);
  resolve_for_world(options, world->size());
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int local_ranks = ranks_per_node();
  // More threads than cores only oversubscribe them: a larger request is capped.
  const int threads = flags.blas_threads ? static_cast<int>(std::min<int64_t>(*flags.blas_threads, cores))
                                         : std::max(1, cores / local_ranks);
  openblas_set_num_threads(threads);
  options.host_memory_per_rank = available_host_memory() / local_ranks;
  if (options.device == Device::cuda && cuda_device_count() > 0)
    options.device_memory_per_rank =
        cuda_free_memory() / std::max(1, local_ranks / std::max(1, cuda_device_count()));

  Registry registry = all_suites();
  std::vector<PlannedCase> plan = plan_run(registry, options, world->size());
  // Output locations are checked before anything runs: no partial results.
  if (!options.out_dir.empty()) require_writable_dir(options.out_dir, "--out");
  if (!options.dump_dir.empty()) require_writable_dir(options.dump_dir, "--dump");
  if (!flags.junit.empty()) require_writable_dir(std::filesystem::path(flags.junit).parent_path().empty()
                                                     ? "."
                                                     : std::filesystem::path(flags.junit).parent_path().string(),
                                                 "--junit");
  CommFactory factory = make_comm_factory(options.device);
  if (root && !blas_core_warning().empty()) std::cerr << "sextant: warning: " << blas_core_warning() << "\n";
  if (root && !flags.quiet)
    std::cout << "# sextant " << kVersionString << ": " << plan.size() << " case instances at ranks "
              << join(plan_rank_counts(plan), ",") << " of " << world->size() << " (" << device_name(options.device)
              << ", blas threads " << threads << ")\n"
              << std::flush;

  Watchdog watchdog(timeout_seconds(flags));
  const CaseDef* last = nullptr;
  RunHooks hooks;
  hooks.started = [&](const PlannedCase& p, size_t, size_t) { watchdog.arm(p.config.id()); };
  hooks.finished = [&](const PlannedCase& p, const CaseRecord& r, size_t i, size_t n) {
    watchdog.disarm();
    if (!root || flags.quiet) return;
    if (p.def != last) std::cout << table_header(*p.def) << "\n";
    last = p.def;
    std::cout << table_row(*p.def, r, i, n) << "\n" << std::flush;
  };
  std::vector<CaseRecord> records = execute_plan(plan, *world, options, hooks, factory);

  nlohmann::json system = describe_system(*world, options.device, chosen_comm_backend());
  int status = 0;
  if (root) {
    for (const CaseRecord& r : records)
      if (!r.error.empty() || r.conformance.status == "fail") status = 1;
    std::cout << table_summary(records) << "\n";
    if (!options.out_dir.empty()) {
      nlohmann::json doc = results_document(describe_run(cmdline, start), system, records);
      std::cout << "# results: " << write_results(doc, options.out_dir) << "\n";
    }
    if (!flags.junit.empty()) {
      write_junit(records, flags.junit);
      std::cout << "# junit: " << flags.junit << "\n";
    }
  }
  return static_cast<int>(world->all_reduce_value(status, ReduceOp::max));
}

// `sextant list --options`: every option of the selected cases.
void list_options(const std::vector<const CaseDef*>& cases) {
  for (const CaseDef* c : cases) {
    std::cout << c->full_name() << "\n";
    for (const OptionSpec& o : c->options)
      std::cout << "  " << o.name << std::string(o.name.size() < 18 ? 18 - o.name.size() : 1, ' ') << o.rule()
                << ": " << o.help << "\n";
  }
}

int do_list(const std::vector<std::string>& selection, bool options, bool metrics) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return 0;
  Registry registry = all_suites();
  if (metrics) {  // JSON, for scripts/gen_metrics_doc.py
    std::cout << metric_definitions_json().dump(1) << "\n";
    return 0;
  }
  if (options) {
    list_options(registry.select(selection));
    return 0;
  }
  std::string suite;
  for (const CaseDef* c : registry.select(selection)) {
    if (c->suite != suite) std::cout << c->suite << "\n";
    suite = c->suite;
    std::cout << "  " << c->full_name() << "  " << c->summary << "\n";
    if (!c->faults.empty()) std::cout << "      distributed faults: " << join(c->faults, ", ") << "\n";
    std::vector<std::string> kernel;
    for (KernelFault k : c->kernel_faults) kernel.push_back(kernel_fault_info(k).name);
    if (!kernel.empty()) std::cout << "      kernel faults: " << join(kernel, ", ") << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  CLI::App app{"sextant: conformance and benchmark suite for 6D-parallel transformer training kernels.\n"
               "Every distributed kernel is checked against a float64 single-device reference and timed.",
               "sextant"};
  app.footer(
      "Examples:\n"
      "  mpirun -np 4 sextant run                      all suites at 1, 2 and 4 ranks\n"
      "  mpirun -np 4 sextant run collectives          busbw table like nccl-tests\n"
      "  mpirun -np 8 sextant run attention --cp 4 --tp 2 --seq 4096\n"
      "  sextant list                                  suites, cases and planted faults\n"
      "  sextant plan --model llama3-405b --gpus 16384 --global-batch 2048   pick a parallel config\n"
      "Results are JSON (schema results/schema.json); scripts/report.py turns them into plots.");
  app.require_subcommand(1);
  std::vector<std::string> list_selection;
  bool list_opts = false, list_metrics = false;
  CLI::App* list = app.add_subcommand("list", "List suites, cases and their planted faults");
  list->add_option("selection", list_selection, "Suites or suite/case");
  list->add_flag("--options", list_opts, "Each case's options: name, rule (type, range or choices) and help");
  list->add_flag("--metrics", list_metrics, "Every metric definition as JSON (unit, better, description)");
  RunFlags flags;
  CLI::App* run = app.add_subcommand("run", "Run cases: check against the reference, time, write results JSON");
  add_run_flags(*run, flags);
  std::string config_path;
  CLI::Option* config = run->add_option("--config", config_path,
                                        "Read options from a TOML file: flag names and case options as keys "
                                        "(command-line flags win)");
  CLI::App* plan = add_plan_command(app);
  add_comm_option(app);  // run --comm (app/commands.cc)

  int code = 0;
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      if (rank == 0) app.exit(e);
      MPI_Finalize();
      return 0;
    } catch (const CLI::CallForAllHelp& e) {
      if (rank == 0) app.exit(e);
      MPI_Finalize();
      return 0;
    } catch (const CLI::ParseError& e) {
      throw UsageError(e.what());
    }
    if (config->count() > 0) apply_config(*run, flags, read_config(config_path));
    if (list->parsed()) code = do_list(list_selection, list_opts, list_metrics);
    else if (run->parsed()) code = do_run(flags, command_line(argc, argv));
    else if (plan->parsed()) code = run_plan_command();
  } catch (const UsageError& e) {
    if (rank == 0) std::cerr << "sextant: " << e.what() << "\n" << e.details();
    code = 2;
  } catch (const std::exception& e) {
    // A runtime failure may leave other ranks inside a collective: end the job.
    std::cerr << "sextant: rank " << rank << ": " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}
