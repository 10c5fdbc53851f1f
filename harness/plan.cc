// plan_run: options, faults, rank counts and every config's rules, checked
// before anything runs (harness/runner.h).
#include <algorithm>
#include <map>
#include <set>

#include "harness/error.h"
#include "harness/runner.h"
#include "harness/strings.h"
#include "harness/topology.h"

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

// The selected cases that plant `fault` (a case's own distributed fault or a
// shared-kernel fault its runs show); UsageError when none does.
std::vector<const CaseDef*> cases_planting(const std::vector<const CaseDef*>& defs, const std::string& fault,
                                           std::optional<KernelFault> kernel) {
  std::vector<const CaseDef*> planted;
  std::set<std::string> known;
  for (const CaseDef* d : defs) {
    for (const FaultDoc& f : d->faults) known.insert(f.name);
    for (KernelFault k : d->kernel_faults) known.insert(kernel_fault_info(k).name);
    const bool plants =
        kernel ? std::count(d->kernel_faults.begin(), d->kernel_faults.end(), *kernel) > 0 : d->plants(fault);
    if (plants) planted.push_back(d);
  }
  require(!planted.empty(), cat("--fault '", fault, "' is not planted by any selected case (known: ",
                                join(std::vector<std::string>(known.begin(), known.end()), ", "), ")"));
  return planted;
}

// Every declaration of `key` among the cases.
std::vector<const OptionSpec*> declarations(const std::vector<const CaseDef*>& cases, const std::string& key) {
  std::vector<const OptionSpec*> out;
  for (const CaseDef* c : cases)
    if (const OptionSpec* s = find_option(c->options, key)) out.push_back(s);
  return out;
}

std::string unknown_option(const std::vector<const CaseDef*>& cases, const std::string& key,
                           const std::string& source) {
  std::set<std::string> names;
  for (const CaseDef* c : cases)
    for (const OptionSpec& s : c->options) names.insert(s.name);
  return cat(source, ": no selected case has an option '", key, "'",
             did_you_mean(key, std::vector<std::string>(names.begin(), names.end())),
             "; 'sextant list --options' shows each case's options");
}

// A value checked against every declaration of its key: the same type
// everywhere, and each case's range or choices.
nlohmann::json checked(const std::vector<const OptionSpec*>& specs, const nlohmann::json& value,
                       const std::string& source) {
  nlohmann::json typed = check_option(*specs.front(), value, source);
  for (const OptionSpec* s : specs) check_option(*s, typed, source);
  return typed;
}

}  // namespace

nlohmann::json resolve_options(const std::vector<const CaseDef*>& cases, const RunOptions& o) {
  nlohmann::json typed = nlohmann::json::object();
  for (auto it = o.options.begin(); it != o.options.end(); ++it) {
    const std::vector<const OptionSpec*> specs = declarations(cases, it.key());
    require(!specs.empty(), unknown_option(cases, it.key(), "option " + it.key()));
    typed[it.key()] = checked(specs, it.value(), "--set " + it.key());
  }
  for (const RawOption& raw : o.raw_options) {
    const std::vector<const OptionSpec*> specs = declarations(cases, raw.key);
    if (specs.empty() && raw.where_declared) continue;
    require(!specs.empty(), unknown_option(cases, raw.key, raw.source));
    typed[raw.key] = checked(specs, raw.value, raw.source);
  }
  return typed;
}

namespace {

// Whether the user chose any of the case's options (its sizes are theirs).
bool user_sized(const CaseDef& def, const nlohmann::json& options) {
  for (const OptionSpec& s : def.options)
    if (options.contains(s.name)) return true;
  return false;
}

// "" when the instance fits the memory a rank may use, else why not.
std::string memory_problem(const CaseDef& def, const CaseConfig& c, const RunOptions& o) {
  if (!def.memory) return "";
  const MemoryEstimate need = def.memory(c);
  auto over = [](const char* what, double need_bytes, double have) {
    return have > 0 && need_bytes > have ? cat(what, " memory: needs about ", format_bytes(need_bytes), " per rank, ",
                                               format_bytes(have), " available")
                                         : std::string();
  };
  std::string problem = over("host", need.host_bytes, o.host_memory_per_rank);
  if (problem.empty()) problem = over("device", need.device_bytes, o.device_memory_per_rank);
  return problem.empty() ? "" : cat(def.full_name(), " ", c.id(), " does not fit: ", problem);
}

}  // namespace

namespace {

// The rank order a config of the first g ranks gets: the user's (--order),
// or the node-aware one (harness/topology.h), remembered per config.
void place(ParallelConfig& p, int g, const RunOptions& o, std::map<std::string, std::string>& chosen) {
  if (o.order_given || node_count(o.node_of_rank) <= 1) return;
  const std::string key = cat(g, " ", to_string(p), " ", p.order);
  auto it = chosen.find(key);
  if (it == chosen.end()) it = chosen.emplace(key, node_aware_order(p, first_ranks(o.node_of_rank, g))).first;
  p.order = it->second;
}

}  // namespace

std::vector<PlannedCase> plan_run(const Registry& registry, const RunOptions& o, int world) {
  std::map<std::string, std::string> orders;
  std::vector<const CaseDef*> defs = registry.select(o.selection);
  const std::optional<KernelFault> kernel = o.fault.empty() ? std::nullopt : find_kernel_fault(o.fault);
  if (!o.fault.empty()) defs = cases_planting(defs, o.fault, kernel);
  if (o.fault_magnitude != 0) {
    bool sized = !kernel;
    for (const CaseDef* d : defs)
      if (const FaultDoc* doc = d->fault_doc(o.fault)) sized = sized && doc->magnitude > 0;
    require(!o.fault.empty() && sized,
            cat("--fault-magnitude ", o.fault_magnitude, " needs a --fault that has a size (such as dkv_scale), not '",
                o.fault, "'"));
  }
  if (kernel && o.device == Device::cuda)
    require(kernel_fault_info(*kernel).cuda, cat("--fault ", o.fault,
                                                 " is planted in the host kernels only: the CUDA "
                                                 "kernels have no fault point for it (use --device host)"));
  const nlohmann::json options = resolve_options(defs, o);
  // Faults are planted in f32, where every gate is tight enough to show them.
  const std::vector<DType> dtypes = o.fault.empty() || !o.dtypes.empty() ? o.dtypes : std::vector<DType>{DType::f32};
  const std::vector<int> counts = resolve_rank_counts(o, world);
  std::vector<PlannedCase> plan;
  for (const CaseDef* def : defs) {
    std::vector<PlannedCase> mine;
    const bool sized = user_sized(*def, options);
    std::string first_problem;
    size_t runnable = 0;
    for (int g : counts) {
      SweepRequest req{g,
                       dtypes,
                       o.parallel,
                       o.vpp_given,
                       options,
                       kernel ? "" : o.fault,
                       kernel.value_or(KernelFault::none),
                       o.profile,
                       &def->options,
                       o.seed,
                       o.device};
      for (CaseConfig c : def->configs(req)) {
        c.suite = def->suite;
        c.name = def->name;
        c.fault = req.fault;
        c.kernel_fault = req.kernel_fault;
        if (const FaultDoc* doc = def->fault_doc(req.fault); doc && doc->magnitude > 0)
          c.fault_magnitude = o.fault_magnitude > 0 ? o.fault_magnitude : doc->magnitude;
        c.device = o.device;
        if (c.ranks != g)
          throw RuntimeError(cat(def->full_name(), " produced an instance for ", c.ranks, " ranks while sweeping ", g));
        place(c.parallel, g, o, orders);
        // A config the user shaped (a pinned config, or any of the case's
        // options) must be valid and fit; one the case chose is skipped.
        const bool users = o.parallel.has_value() || sized;
        std::string problem;
        try {
          validate(c.parallel, c.ranks);
          def->validate(c);
        } catch (const UsageError& e) {
          if (users) throw;
          problem = e.what();
        }
        if (problem.empty()) {
          problem = memory_problem(*def, c, o);
          if (!problem.empty() && users) throw UsageError(problem);
        }
        if (problem.empty()) ++runnable;
        else if (first_problem.empty()) first_problem = problem;
        mine.push_back({def, std::move(c), problem});
      }
    }
    // Nothing of the case can run as asked: the rule the user's input breaks.
    if (runnable == 0 && !first_problem.empty()) throw UsageError(first_problem);
    for (PlannedCase& p : mine) plan.push_back(std::move(p));
  }
  // The cases that run first (the screen), then the others; rank counts
  // ascending within each, cases in registry order within a rank count (the
  // order execute_plan runs them).
  std::stable_sort(plan.begin(), plan.end(), [](const PlannedCase& a, const PlannedCase& b) {
    if (a.def->runs_first != b.def->runs_first) return a.def->runs_first;
    return a.config.ranks < b.config.ranks;
  });
  return plan;
}

}  // namespace sextant
