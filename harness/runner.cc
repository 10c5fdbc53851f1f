#include "harness/runner.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <thread>

#include "harness/error.h"
#include "harness/heartbeat.h"
#include "harness/strings.h"

namespace sextant {

std::vector<int> plan_rank_counts(const std::vector<PlannedCase>& plan) {
  std::set<int> counts;
  for (const PlannedCase& p : plan) counts.insert(p.config.ranks);
  return {counts.begin(), counts.end()};
}

namespace {

// What the harness records for every case, beside the case's own metrics.
const MetricDef& kBytesSent = define_metric(
    {"", "bytes_sent_per_rank", "B", Better::neither,
     "bytes a rank sent per iteration of the primary region, mean over ranks (max beside it), ring convention"});
const MetricDef& kBytesSentRegion = define_metric({"", "bytes_sent_per_rank_<region>", "B", Better::neither,
                                                   "the same for each other timed region, suffixed with its name"});
const MetricDef& kComm = define_metric(
    {"", "comm", "json", Better::neither,
     "GPU and staged runs: backend, overlap (communication on its own stream), timings_representative, allocation"});

// Sum of the traffic counters of a kernel communicator and its grid.
uint64_t total_bytes(Communicator& comm, const GridComms& grid) {
  uint64_t total = comm.stats().total_bytes();
  for (Dim d : {Dim::tp, Dim::cp, Dim::dp, Dim::pp, Dim::ep, Dim::etp, Dim::edp, Dim::dp_cp, Dim::tp_cp})
    total += grid.get(d).stats().total_bytes();
  return total;
}
void reset_bytes(Communicator& comm, const GridComms& grid) {
  comm.reset_stats();
  for (Dim d : {Dim::tp, Dim::cp, Dim::dp, Dim::pp, Dim::ep, Dim::etp, Dim::edp, Dim::dp_cp, Dim::tp_cp})
    grid.get(d).reset_stats();
}

// True on every rank when every rank reports ok (keeps ranks in step after a
// local exception so nobody waits in a collective the others skipped).
bool all_ok(Communicator& host, bool ok) { return host.all_reduce_value(ok ? 0.0 : 1.0, ReduceOp::max) == 0.0; }

}  // namespace

namespace {

// Communicators for one (group, parallel config), built once and reused by
// every instance that shares them (splits are collective and not free).
struct GroupEnv {
  std::unique_ptr<Communicator> kernel_owned, self_mpi, self_kernel;
  Communicator* kernel = nullptr;
  Communicator* self = nullptr;
  std::unique_ptr<GridComms> grid;
};

std::unique_ptr<GroupEnv> make_env(MpiCommunicator& group, const ParallelConfig& parallel,
                                   const CommFactory& make_kernel_comm) {
  auto env = std::make_unique<GroupEnv>();
  if (make_kernel_comm) env->kernel_owned = make_kernel_comm(group);
  env->kernel = env->kernel_owned ? env->kernel_owned.get() : &group;
  env->self_mpi = group.split(group.rank(), 0);
  if (make_kernel_comm) env->self_kernel = make_kernel_comm(static_cast<MpiCommunicator&>(*env->self_mpi));
  env->self = env->self_kernel ? env->self_kernel.get() : env->self_mpi.get();
  env->grid = std::make_unique<GridComms>(make_grid_comms(*env->kernel, parallel));
  return env;
}

CaseRecord run_in_env(const PlannedCase& planned, MpiCommunicator& group, GroupEnv& env, const RunOptions& o) {
  const CaseDef& def = *planned.def;
  const CaseConfig& config = planned.config;
  Communicator& kernel = *env.kernel;
  CaseRecord record{.config = config, .device = o.device, .backend = kernel.backend()};

  std::string local_error;
  auto guarded = [&](const std::string& phase, const std::function<void()>& fn) {
    if (!local_error.empty()) return;
    heartbeat_phase(phase.c_str());
    try {
      fn();
    } catch (const std::exception& e) {
      local_error = cat(phase, ": ", e.what());
    }
  };
  CaseContext ctx{config, kernel, group, *env.grid, *env.self, o.device, o.seed, o.trace_dir};
  // A shared-kernel fault is live for the whole case: the baseline runs it too.
  PlantedKernelFault planted(config.kernel_fault);
  std::unique_ptr<CaseState> state;
  guarded("setup", [&] { state = def.setup(ctx); });
  if (o.check && all_ok(group, local_error.empty())) {
    const std::string case_dir = dump_folder_name(config.id());
    // Everything needed to recompute the case from its dumped inputs.
    const nlohmann::json described = {{"suite", config.suite},
                                      {"case", config.name},
                                      {"id", config.id()},
                                      {"params", config.params},
                                      {"parallel", config.parallel},
                                      {"ranks", config.ranks},
                                      {"dtype", dtype_name(config.dtype)},
                                      {"seed", o.seed},
                                      {"device", device_name(o.device)},
                                      {"fault", config.fault_name()}};
    // Root creates the dump folder; a failure there is the case's error on
    // every rank (agreed before the check's collectives start), not an abort.
    std::optional<Checker> checker;
    guarded("dump", [&] { checker.emplace(group, config.dtype, DumpTarget{o.dump_dir, case_dir, described}); });
    if (all_ok(group, local_error.empty())) {
      guarded("check", [&] { def.check(*state, *checker); });
      if (all_ok(group, local_error.empty())) record.conformance = checker->finish();
    }
  }
  // GPU regions are timed with CUDA events on the compute stream (CudaRegionTimer):
  // a host clock would stop before the queued GPU work ends.
  std::unique_ptr<CudaRegionTimer> gpu_timer;
  IterationClock clock = wall_clock();
  if (o.device == Device::cuda) {
    guarded("timer", [&] { gpu_timer = std::make_unique<CudaRegionTimer>(); });
    if (gpu_timer) clock = {[&] { gpu_timer->start(); }, [&] { return gpu_timer->stop(); }};
  }
  if (o.device == Device::cuda || kernel.backend() != "mpi")
    record.metrics[kComm.name] = {{"backend", kernel.backend()},
                                  {"overlap", kernel.overlaps_compute()},
                                  {"timings_representative", kernel.timings_representative()}};
  if (o.device == Device::cuda) record.metrics[kComm.name]["allocation"] = cuda_async_allocation() ? "async" : "sync";
  for (const std::string& region : def.regions) {
    if (o.timing.iters <= 0 || !all_ok(group, local_error.empty())) break;
    reset_bytes(kernel, *env.grid);
    guarded(region, [&] {
      record.times[region] = time_iterations(
          group, o.timing, [&] { def.run(*state, region); }, clock);
    });
    double per_iter = static_cast<double>(total_bytes(kernel, *env.grid)) / (o.timing.warmup + o.timing.iters);
    double mean = group.all_reduce_value(per_iter, ReduceOp::sum) / group.size();
    double max = group.all_reduce_value(per_iter, ReduceOp::max);
    const std::string name = region == def.regions.front() ? kBytesSent.name : kBytesSent.name + "_" + region;
    record.metrics[name] = {{"value", mean}, {"unit", kBytesSentRegion.unit}, {"max", max}};
  }
  if (all_ok(group, local_error.empty()) && !record.times.empty())
    guarded("metrics", [&] {
      nlohmann::json m = def.metrics(*state, record.times).json();
      for (auto it = m.begin(); it != m.end(); ++it) record.metrics[it.key()] = it.value();
    });
  // Any rank's error becomes the record's error (root keeps the record).
  heartbeat_phase("gather errors");
  std::vector<std::string> errors = all_gather_strings(group, local_error);
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) {
      record.error = cat("rank ", r, " ", errors[r]);
      record.conformance.status = "fail";
      break;
    }
  return record;
}
// A barrier that sleeps while it waits. Ranks outside the group of the
// current rank count wait here for the whole group's run; MPI_Barrier would
// spin them, and on an oversubscribed node the spinning ranks take the cores
// the measured group needs. Waking within a millisecond of the last arrival
// costs nothing that is timed (it sits between rank counts).
void sleeping_barrier(MpiCommunicator& world) {
  CommCallScope scope("barrier between rank counts");
  MPI_Request request;
  check_mpi(MPI_Ibarrier(world.handle(), &request), "MPI_Ibarrier");
  for (int done = 0;;) {
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

CaseRecord run_case(const PlannedCase& planned, MpiCommunicator& group, const RunOptions& o,
                    const CommFactory& make_kernel_comm) {
  auto env = make_env(group, planned.config.parallel, make_kernel_comm);
  return run_in_env(planned, group, *env, o);
}

std::vector<CaseRecord> execute_plan(const std::vector<PlannedCase>& plan, MpiCommunicator& world, const RunOptions& o,
                                     const RunHooks& hooks, const CommFactory& make_kernel_comm) {
  std::vector<CaseRecord> records;
  size_t index = 0;
  // Blocks of consecutive cases at one rank count, in plan order.
  for (size_t begin = 0; begin < plan.size();) {
    const int g = plan[begin].config.ranks;
    size_t end = begin;
    while (end < plan.size() && plan[end].config.ranks == g) ++end;
    // The first g ranks form the group; the others sleep at the world barrier.
    heartbeat_begin(static_cast<int>(index), "form the group");
    std::unique_ptr<Communicator> group_comm = world.split(world.rank() < g ? 0 : -1, world.rank());
    heartbeat_end();
    auto* group = static_cast<MpiCommunicator*>(group_comm.get());
    std::map<std::string, std::unique_ptr<GroupEnv>> envs;
    for (; begin < end; ++begin) {
      const PlannedCase& p = plan[begin];
      ++index;
      if (!group) continue;
      std::string key = to_string(p.config.parallel) + " " + p.config.parallel.order;
      // The heartbeat arms the watchdog from here until the record is handed on.
      heartbeat_begin(static_cast<int>(index), "communicators");
      if (hooks.started) hooks.started(p, index, plan.size());
      CaseRecord r;
      if (!p.skip_reason.empty()) {
        r = CaseRecord{.config = p.config, .device = o.device, .backend = "none", .skip_reason = p.skip_reason};
      } else {
        if (!envs.count(key)) envs[key] = make_env(*group, p.config.parallel, make_kernel_comm);
        r = run_in_env(p, *group, *envs[key], o);
      }
      heartbeat_phase("record");
      if (hooks.finished) hooks.finished(p, r, index, plan.size());
      heartbeat_end();
      if (world.rank() == 0) records.push_back(std::move(r));
    }
    // Members of the group wait here for each other (watched: a rank that
    // stops between cases must not hang the run); the others for the group.
    if (group) heartbeat_begin(static_cast<int>(index), "end of rank count");
    sleeping_barrier(world);
    heartbeat_end();
  }
  return records;
}

}  // namespace sextant
