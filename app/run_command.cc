#include "app/run_command.h"

#include <cblas.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "app/commands.h"
#include "app/finalizer.h"
#include "app/watchdog.h"
#include "harness/blas.h"
#include "harness/build_info.h"
#include "harness/device.h"
#include "harness/error.h"
#include "harness/heartbeat.h"
#include "harness/journal.h"
#include "harness/results.h"
#include "harness/resume.h"
#include "harness/runner.h"
#include "harness/strings.h"
#include "harness/table.h"
#include "harness/topology.h"
#include "harness/version.h"

namespace sextant {

namespace {

constexpr const char* kFooter =
    "Timeouts and interrupted runs:\n"
    "  Each finished case is appended to a journal beside the results (OUT/sextant-<run id>.journal, JSON\n"
    "  lines, fsynced). A case that runs longer than --timeout (seconds; inf: never) ends the job: the\n"
    "  watchdog first names the stuck ranks and where every rank is (case, phase, communicator call).\n"
    "  On a timeout, SIGTERM or SIGINT (mpirun sends SIGTERM to every rank when one dies) the journal\n"
    "  becomes an incomplete results file (run.complete false, run.incomplete_reason). Where rank 0\n"
    "  itself was killed, 'sextant recover JOURNAL' writes it. 'sextant run ... --resume FILE' (that\n"
    "  file or the journal) runs only the missing cases of the same plan and writes a complete file.\n"
    "Exit status: 0 every case passed; 1 a case failed or errored; 2 bad input (one line, nothing\n"
    "written); 3 a case exceeded --timeout; killed by the signal on SIGTERM/SIGINT.";

// Where the run's configs lie on the nodes: the orders chosen and a warning
// for each config whose TP groups span nodes. Printed by world rank 0.
nlohmann::json describe_placement(const RunOptions& options, const std::vector<PlannedCase>& plan, bool root) {
  const NodeMap& nodes = options.node_of_rank;
  nlohmann::json orders = nlohmann::json::object(), warnings = nlohmann::json::array();
  std::set<std::string> seen;
  for (const PlannedCase& p : plan) {
    const ParallelConfig& c = p.config.parallel;
    const std::string key = cat("ranks ", p.config.ranks, ": ", to_string(c));
    if (!seen.insert(key + " " + c.order).second) continue;
    orders[key] = c.order;
    for (const std::string& w : placement_warnings(c, first_ranks(nodes, p.config.ranks))) {
      if (root) std::cerr << "sextant: warning: " << w << "\n";
      warnings.push_back(w);
    }
  }
  return {{"nodes", node_count(nodes)},
          {"ranks_per_node", ranks_per_node(nodes)},
          {"order", options.order_given     ? "given (--order)"
                    : node_count(nodes) > 1 ? "node-aware"
                                            : "default"},
          {"orders", orders},
          {"warnings", warnings}};
}

// Memory the kernel may still hand out (MemAvailable), or 0 when unknown.
double available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

// Runs `check` on every rank and makes every rank throw the first UsageError
// any rank found, so that the whole job exits 2 together.
void agree_on_usage(MpiCommunicator& world, const std::function<void()>& check) {
  std::string error;
  try {
    check();
  } catch (const UsageError& e) {
    error = e.what();
  }
  for (const std::string& e : all_gather_strings(world, error))
    if (!e.empty()) throw UsageError(e);
}

// Output locations are checked for real (a probe file) before anything runs:
// a run that cannot write its results must not run for an hour first. World
// rank 0 writes the results, JUnit and traces; any rank may dump.
void check_outputs(const RunOptions& o, const std::string& junit, int rank) {
  if (rank == 0 && !o.out_dir.empty()) require_writable_dir(o.out_dir, "--out");
  if (rank == 0 && !o.trace_dir.empty()) require_writable_dir(o.trace_dir, "--traces");
  if (rank == 0 && !junit.empty()) require_writable_junit(junit);
  // Only rank 0 writes dumps (Checker). Probing on every rank raced: one
  // rank's probe removed the folder it had created while rank 0 probed
  // --traces inside it.
  if (rank == 0 && !o.dump_dir.empty()) require_writable_dir(o.dump_dir, "--dump");
}

// The finished cases of the run being resumed: the whole snapshot on rank 0,
// their ids on every rank.
RunSnapshot read_resumed(MpiCommunicator& world, const std::string& path, const nlohmann::json& plan_json) {
  RunSnapshot snapshot;
  agree_on_usage(world, [&] {
    if (world.rank() != 0) return;  // the file need only be on rank 0's host
    snapshot = read_run_file(path, "--resume");
    require_same_plan(snapshot, plan_json, "--resume", path);
  });
  std::vector<std::string> ids;
  for (const nlohmann::json& c : snapshot.cases) ids.push_back(c["id"].get<std::string>());
  ids = split(all_gather_strings(world, join(ids, "\n"))[0], '\n');
  if (world.rank() != 0)
    for (const std::string& id : ids) snapshot.cases.push_back({{"id", id}});
  return snapshot;
}

// World rank 0's end of the run: the journal, and what the results need.
struct RunEnd {
  nlohmann::json run, system;
  std::string junit;                 // absolute, or empty
  std::unique_ptr<Journal> journal;  // none with --no-results
  RunFinalizer finalizer;
};

void open_journal(RunEnd& end, const std::string& out_dir, const nlohmann::json& plan_json,
                  const RunSnapshot& resumed) {
  end.journal = std::make_unique<Journal>(
      results_base(out_dir, end.run["id"].get<std::string>()),
      nlohmann::json{{"run", end.run}, {"system", end.system}, {"plan", plan_json}, {"junit", end.junit}});
  for (const nlohmann::json& c : resumed.cases) end.journal->append_case(c);  // a resumed run's journal holds all
  end.finalizer.attach(end.journal->path(), end.junit);
}

// Rank 0 abandons the run on SIGTERM/SIGINT; the others linger so it can.
std::unique_ptr<TerminationHandler> handle_termination(bool root, RunFinalizer& finalizer) {
  if (!root)
    return std::make_unique<TerminationHandler>([](const char*) {
      std::this_thread::sleep_for(std::chrono::duration<double>(TerminationHandler::kLingerSeconds));
    });
  return std::make_unique<TerminationHandler>([&finalizer](const char* name) {
    finalizer.abandon(cat("terminated by ", name,
                          " (mpirun sends SIGTERM to every rank when one rank dies or mpirun is interrupted)"));
  });
}

Watchdog::Settings watch_settings(double timeout, const MpiCommunicator& world, const Heartbeat& heartbeat,
                                  const std::vector<PlannedCase>& todo, RunFinalizer* finalizer) {
  Watchdog::Settings watch;
  watch.limit_s = timeout;
  watch.world_rank = world.rank();
  watch.world_size = world.size();
  watch.node_leader = heartbeat.slot() == 0;
  watch.describe_case = [&todo](int i) {
    if (i < 1 || i > static_cast<int>(todo.size())) return std::string("the start, before the first case");
    return cat("case ", i, " of ", todo.size(), " '", todo[i - 1].config.id(), "'");
  };
  if (finalizer) watch.abandon = [finalizer](const std::string& reason) { finalizer->abandon(reason); };
  return watch;
}

// Writes the complete results (old and new records in plan order) and JUnit;
// returns the exit status of the whole run.
int write_complete(RunEnd& end, const std::vector<PlannedCase>& plan, const RunSnapshot& resumed,
                   const std::vector<CaseRecord>& records, const ResultsJudge& judge) {
  nlohmann::json fresh = nlohmann::json::array();
  for (const CaseRecord& r : records) fresh.push_back(to_json(r));
  end.run["end"] = iso_time_now();
  end.run["complete"] = true;
  nlohmann::json doc = results_document(end.run, end.system, in_plan_order(plan, resumed.cases, fresh));
  const nlohmann::json& summary = doc["run"]["summary"];
  std::cout << table_summary(records) << "\n";
  if (!resumed.cases.empty())
    std::cout << "# with the " << resumed.cases.size() << " finished before: " << summary["cases"] << " cases, "
              << summary["pass"] << " pass, " << summary["fail"] << " fail, " << summary["error"] << " errors\n";
  const nlohmann::json suspects = suspects_of(doc["cases"]);
  for (const nlohmann::json& s : suspects) std::cout << "# suspect: " << describe_suspect(s) << "\n";
  // A named suspect fails the run as a failed case does: the cluster has a part to look at.
  const int cases_status =
      summary["fail"].get<int>() + summary["error"].get<int>() + static_cast<int>(suspects.size()) > 0 ? 1 : 0;
  const int status = judge ? judge(doc, end.journal ? end.journal->base() : std::string()) : cases_status;
  end.finalizer.complete([&] {
    if (end.journal) {
      std::cout << "# results: " << write_results_at(doc, end.journal->base()) << "\n";
      unlink(end.journal->path().c_str());  // the results hold everything it did
    }
    if (!end.junit.empty()) std::cout << "# junit: " << write_junit(doc, end.junit) << "\n";
  });
  return status;
}

}  // namespace

void add_interruption_options(CLI::App& run, std::string& resume) {
  run.add_option("--resume", resume,
                 "Finish an interrupted run: FILE is its incomplete results file or its journal. Runs only the "
                 "missing cases (same plan, same options, same world size; otherwise exit 2) and writes a "
                 "complete results file with the earlier and the new records")
      ->type_name("FILE")
      ->group("Output");
  run.footer(kFooter);
}

int run_command(const RunFlags& flags, const std::string& resume, const std::string& cmdline, const ResultsJudge& judge,
                const std::string& header) {
  auto world = MpiCommunicator::world();
  const bool root = world->rank() == 0;
  const std::string start = iso_time_now();
  RunOptions options = to_run_options(flags);
  resolve_for_world(options, world->size());
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  options.node_of_rank = detect_nodes(*world);
  const int local_ranks = ranks_per_node(options.node_of_rank)
                              .at(static_cast<size_t>(options.node_of_rank.at(static_cast<size_t>(world->rank()))));
  const int threads = blas_threads_for(options.blas_threads ? static_cast<int>(*options.blas_threads) : 0, cores,
                                       cores_allowed(), local_ranks);
  openblas_set_num_threads(threads);
  options.host_memory_per_rank = available_host_memory() / local_ranks;
  if (options.device == Device::cuda && cuda_device_count() > 0)
    options.device_memory_per_rank = cuda_free_memory() / std::max(1, local_ranks / std::max(1, cuda_device_count()));

  Registry registry = all_suites();
  const std::vector<PlannedCase> plan = plan_run(registry, options, world->size());
  agree_on_usage(*world, [&] { check_outputs(options, options.junit, world->rank()); });
  CommFactory factory = make_comm_factory(options.device);
  const nlohmann::json plan_json = describe_plan(options, plan, world->size(), chosen_comm_backend());
  RunSnapshot resumed;
  if (!resume.empty()) resumed = read_resumed(*world, resume, plan_json);
  const std::vector<PlannedCase> todo = missing_cases(plan, resumed);

  std::unique_ptr<Heartbeat> heartbeat = open_node_heartbeat(*world);
  Heartbeat::install(heartbeat.get());
  RunEnd end;  // used on world rank 0, which holds the records
  end.system = describe_system(*world, options.device, chosen_comm_backend());
  end.run = describe_run(cmdline, start);
  end.run["plan"] = plan_json;
  end.run["placement"] = describe_placement(options, plan, root);
  if (root && !resume.empty()) end.run["resumed_from"] = resumed.run.value("id", resume);
  if (!options.junit.empty()) end.junit = std::filesystem::absolute(options.junit).string();
  if (root && !options.out_dir.empty()) open_journal(end, options.out_dir, plan_json, resumed);
  std::unique_ptr<TerminationHandler> signals = handle_termination(root, end.finalizer);
  Watchdog watchdog(watch_settings(options.timeout_s, *world, *heartbeat, todo, root ? &end.finalizer : nullptr),
                    *heartbeat);

  if (root && !blas_core_warning().empty()) std::cerr << "sextant: warning: " << blas_core_warning() << "\n";
  if (root && !options.quiet) {
    if (!header.empty()) std::cout << header << "\n";
    std::cout << "# sextant " << kVersionString << " (" << build_git_sha() << (build_git_dirty() ? " dirty" : "")
              << "): " << plan.size() << " case instances at ranks " << join(plan_rank_counts(plan), ",") << " of "
              << world->size() << " (" << device_name(options.device) << ", blas threads " << threads << ")\n";
    if (!resume.empty())
      std::cout << "# resuming " << resume << ": " << resumed.cases.size() << " finished, " << todo.size()
                << " to run\n";
    if (end.journal) std::cout << "# journal: " << end.journal->path() << "\n";
    std::cout << std::flush;
  }

  const CaseDef* last = nullptr;
  RunHooks hooks;
  hooks.finished = [&](const PlannedCase& p, const CaseRecord& r, size_t i, size_t n) {
    if (!root) return;
    if (end.journal) end.journal->append_case(to_json(r));
    if (options.quiet) return;
    if (p.def != last) std::cout << table_header(*p.def) << "\n";
    last = p.def;
    std::cout << table_row(*p.def, r, i, n) << "\n" << std::flush;
  };
  std::vector<CaseRecord> records;
  try {
    records = execute_plan(todo, *world, options, hooks, factory);
  } catch (const std::exception& e) {
    if (root) end.finalizer.abandon(cat("rank 0: ", e.what()));
    throw;
  }

  heartbeat_begin(static_cast<int>(todo.size()), "finish");
  int status = root ? write_complete(end, plan, resumed, records, judge) : 0;
  status = static_cast<int>(world->all_reduce_value(status, ReduceOp::max));
  heartbeat_end();
  return status;
}

}  // namespace sextant
