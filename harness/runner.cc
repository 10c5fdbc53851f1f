#include "harness/runner.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {

std::vector<int> default_rank_counts(int world) {
  std::vector<int> counts;
  for (int g = 1; g <= world; g *= 2) counts.push_back(g);
  if (counts.back() != world) counts.push_back(world);
  return counts;
}

std::vector<int> resolve_rank_counts(const RunOptions& o, int world) {
  if (o.parallel) {
    require(o.rank_counts.empty(),
            "--ranks cannot be combined with --tp/--cp/--pp/--dp/--ep: a pinned config fixes the rank count");
    validate(*o.parallel, world);
    return {world};
  }
  if (o.rank_counts.empty()) return default_rank_counts(world);
  std::vector<int> counts = o.rank_counts;
  for (int g : counts) {
    require(g >= 1, cat("--ranks ", g, " must be at least 1"));
    require(g <= world, cat("--ranks ", g, " exceeds the world size ", world, " (mpirun -np)"));
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

}  // namespace

std::vector<PlannedCase> plan_run(const Registry& registry, const RunOptions& o, int world) {
  std::vector<const CaseDef*> defs = registry.select(o.selection);
  if (!o.fault.empty()) {
    std::vector<const CaseDef*> planted;
    std::set<std::string> known;
    for (const CaseDef* d : defs) {
      known.insert(d->faults.begin(), d->faults.end());
      if (std::count(d->faults.begin(), d->faults.end(), o.fault)) planted.push_back(d);
    }
    require(!planted.empty(), cat("--fault '", o.fault, "' is not planted by any selected case (known: ",
                                  join(std::vector<std::string>(known.begin(), known.end()), ", "), ")"));
    defs = planted;
  }
  std::vector<PlannedCase> plan;
  for (int g : resolve_rank_counts(o, world)) {
    for (const CaseDef* def : defs) {
      SweepRequest req{g, o.dtypes, o.parallel, o.options, o.fault, o.profile, o.seed};
      for (CaseConfig c : def->configs(req)) {
        c.suite = def->suite;
        c.name = def->name;
        c.fault = o.fault;
        c.device = o.device;
        if (c.ranks != g) throw RuntimeError(cat(def->full_name(), " produced an instance for ", c.ranks,
                                                 " ranks while sweeping ", g));
        validate(c.parallel, c.ranks);
        def->validate(c);
        plan.push_back({def, std::move(c)});
      }
    }
  }
  return plan;
}

std::vector<int> plan_rank_counts(const std::vector<PlannedCase>& plan) {
  std::set<int> counts;
  for (const PlannedCase& p : plan) counts.insert(p.config.ranks);
  return {counts.begin(), counts.end()};
}

namespace {

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
  CaseRecord record{config, o.device, kernel.backend(), {}, {}, nlohmann::json::object(), ""};

  std::string local_error;
  auto guarded = [&](const std::string& phase, const std::function<void()>& fn) {
    if (!local_error.empty()) return;
    try {
      fn();
    } catch (const std::exception& e) {
      local_error = cat(phase, ": ", e.what());
    }
  };
  CaseContext ctx{config, kernel, group, *env.grid, *env.self, o.device, o.seed, o.out_dir};
  std::unique_ptr<CaseState> state;
  guarded("setup", [&] { state = def.setup(ctx); });
  if (o.check && all_ok(group, local_error.empty())) {
    std::string case_dir = config.id();
    for (char& c : case_dir) c = (c == ' ' || c == '/' || c == '=') ? '_' : c;
    Checker checker(group, config.dtype, DumpTarget{o.dump_dir, case_dir, config.params});
    guarded("check", [&] { def.check(*state, checker); });
    if (all_ok(group, local_error.empty())) record.conformance = checker.finish();
  }
  // GPU regions are timed with events on the compute stream (DESIGN.md).
  std::unique_ptr<CudaRegionTimer> gpu_timer;
  IterationClock clock = wall_clock();
  if (o.device == Device::cuda) {
    guarded("timer", [&] { gpu_timer = std::make_unique<CudaRegionTimer>(); });
    if (gpu_timer) clock = {[&] { gpu_timer->start(); }, [&] { return gpu_timer->stop(); }};
  }
  if (o.device == Device::cuda || kernel.backend() != "mpi")
    record.metrics["comm"] = {{"backend", kernel.backend()},
                              {"overlap", kernel.overlaps_compute()},
                              {"timings_representative", kernel.timings_representative()}};
  if (o.device == Device::cuda) record.metrics["comm"]["allocation"] = cuda_async_allocation() ? "async" : "sync";
  for (const std::string& region : def.regions) {
    if (o.timing.iters <= 0 || !all_ok(group, local_error.empty())) break;
    reset_bytes(kernel, *env.grid);
    guarded(region, [&] {
      record.times[region] = time_iterations(group, o.timing, [&] { def.run(*state, region); }, clock);
    });
    double per_iter = static_cast<double>(total_bytes(kernel, *env.grid)) / (o.timing.warmup + o.timing.iters);
    double mean = group.all_reduce_value(per_iter, ReduceOp::sum) / group.size();
    double max = group.all_reduce_value(per_iter, ReduceOp::max);
    std::string suffix = region == def.regions.front() ? "" : "_" + region;
    record.metrics["bytes_sent_per_rank" + suffix] = {{"value", mean}, {"unit", "B"}, {"max", max}};
  }
  if (all_ok(group, local_error.empty()) && !record.times.empty())
    guarded("metrics", [&] {
      nlohmann::json m = def.metrics(*state, record.times).json();
      for (auto it = m.begin(); it != m.end(); ++it) record.metrics[it.key()] = it.value();
    });
  // Any rank's error becomes the record's error (root keeps the record).
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

std::vector<CaseRecord> execute_plan(const std::vector<PlannedCase>& plan, MpiCommunicator& world,
                                     const RunOptions& o, const RunHooks& hooks,
                                     const CommFactory& make_kernel_comm) {
  std::vector<CaseRecord> records;
  size_t index = 0;
  for (int g : plan_rank_counts(plan)) {
    // The first g ranks form the group; the others sleep at the world barrier.
    std::unique_ptr<Communicator> group_comm = world.split(world.rank() < g ? 0 : -1, world.rank());
    auto* group = static_cast<MpiCommunicator*>(group_comm.get());
    std::map<std::string, std::unique_ptr<GroupEnv>> envs;
    for (const PlannedCase& p : plan) {
      if (p.config.ranks != g) continue;
      ++index;
      if (!group) continue;
      std::string key = to_string(p.config.parallel) + " " + p.config.parallel.order;
      if (!envs.count(key)) envs[key] = make_env(*group, p.config.parallel, make_kernel_comm);
      if (hooks.started) hooks.started(p, index, plan.size());
      CaseRecord r = run_in_env(p, *group, *envs[key], o);
      if (hooks.finished) hooks.finished(p, r, index, plan.size());
      if (world.rank() == 0) records.push_back(std::move(r));
    }
    sleeping_barrier(world);
  }
  return records;
}

}  // namespace sextant
