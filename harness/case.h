// A case, as in nccl-tests: a small table of functions that the harness
// drives. The harness owns sweeps over rank counts, warm-up and timing,
// cross-rank reduction, conformance bookkeeping and JSON; the case owns its
// problem: which instances exist (configs), bad-input rules (validate), data
// (setup), the timed regions (timed), the correctness check (check) and the
// cost model that turns times into metrics (metrics).
//
// Adding a case = one file that builds a CaseTable<State> and registers it
// with SEXTANT_REGISTER_CASE (docs/ADDING_A_CASE.md).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/check.h"
#include "harness/comm.h"
#include "harness/fault_table.h"
#include "harness/grid_comms.h"
#include "harness/kernel_fault.h"
#include "harness/metrics.h"
#include "harness/options.h"
#include "harness/profile.h"
#include "harness/timing.h"

namespace sextant {

// One concrete instance: what runs and what the results record.
struct CaseConfig {
  std::string suite, name;
  nlohmann::json params = nlohmann::json::object();  // shapes and knobs
  ParallelConfig parallel;                           // its sizes multiply to `ranks`
  int ranks = 1;                                     // group size the instance runs on
  DType dtype = DType::f32;
  std::string fault;                             // planted distributed-only fault of the case, "" for none
  double fault_magnitude = 0;                    // its size, for a fault that has one (else 0)
  KernelFault kernel_fault = KernelFault::none;  // planted shared-kernel fault (the baseline runs it too)
  Device device = Device::host;  // where it runs (--device): validate() refuses a device a case cannot use

  std::string id() const;          // stable, human-readable; also the --dump folder name
  std::string fault_name() const;  // the planted fault of either kind, "" for none
  // Typed parameter access (throws RuntimeError when missing).
  int64_t i(const std::string& key) const { return params.at(key).get<int64_t>(); }
  double f(const std::string& key) const { return params.at(key).get<double>(); }
  std::string s(const std::string& key) const { return params.at(key).get<std::string>(); }
  bool b(const std::string& key) const { return params.at(key).get<bool>(); }
};

// User options as one case's sweep sees them.
struct SweepRequest {
  int ranks = 1;                                      // group size to enumerate instances for
  std::vector<DType> dtypes;                          // empty: the case's defaults
  std::optional<ParallelConfig> parallel;             // pinned by --tp/--cp/...; else the case sweeps
  bool vpp_given = false;                             // the pinned config's vpp is the user's (else the case's own)
  nlohmann::json options = nlohmann::json::object();  // typed, checked against the declared options
  std::string fault;                                  // distributed-only fault of the case, "" for none
  KernelFault kernel_fault = KernelFault::none;       // shared-kernel fault
  Profile profile = Profile::standard;
  const std::vector<OptionSpec>* declared = nullptr;  // the case's options (get() reads only those)
  uint64_t seed = 1234;          // --seed: options drawn at random (e.g. sequence lengths) draw from it
  Device device = Device::host;  // where the cases will run (a default may depend on it)

  // Option value, or fallback when the user did not set it. Reading an
  // option the case did not declare is a programming error (RuntimeError).
  template <class T>
  T get(const std::string& key, const T& fallback) const {
    require_declared(key);
    return options.contains(key) ? options.at(key).get<T>() : fallback;
  }
  bool has(const std::string& key) const {
    require_declared(key);
    return options.contains(key);
  }
  void require_declared(const std::string& key) const;
  std::vector<DType> dtypes_or(std::vector<DType> defaults) const { return dtypes.empty() ? defaults : dtypes; }
};

// What a running case can reach. Communicators are passed, never global.
struct CaseContext {
  const CaseConfig& config;
  Communicator& comm;       // the instance's ranks, kernel backend (mpi or nccl)
  Communicator& host_comm;  // the same ranks over MPI: checks and bookkeeping
  const GridComms& grid;    // per-dimension communicators of config.parallel (over comm)
  Communicator& self;       // this rank alone, kernel backend: baselines at world size 1
  Device device = Device::host;
  uint64_t seed = 0;
  std::string out_dir;  // where a case may write side files (traces: --traces); may be empty
};

// Peak memory one rank of an instance needs, estimated before anything is
// allocated (the group's rank 0 also holds the float64 reference).
struct MemoryEstimate {
  double host_bytes = 0;
  double device_bytes = 0;
};

using RegionTimes = std::map<std::string, TimeStats>;

// Type-erased case, as the harness sees it.
class CaseState {
 public:
  virtual ~CaseState() = default;
};
struct CaseDef {
  std::string suite, name, summary;
  // Runs before every other case, at each of its rank counts, so that a
  // run (and qualify) first says which rank, link or node to look at.
  bool runs_first = false;
  std::vector<OptionSpec> options;         // what --set / flags / --config may give it
  std::vector<FaultDoc> faults;            // planted distributed-only faults it understands (fault_table.h)
  std::vector<KernelFault> kernel_faults;  // shared-kernel faults its runs can show
  std::vector<std::string> table_metrics;  // metric columns for the live table
  std::function<std::vector<CaseConfig>(const SweepRequest&)> configs;
  std::function<void(const CaseConfig&)> validate;
  std::function<MemoryEstimate(const CaseConfig&)> memory;
  std::function<std::unique_ptr<CaseState>(CaseContext&)> setup;
  std::vector<std::string> regions;  // timed regions, primary first
  std::function<void(CaseState&, const std::string&)> run;
  std::function<void(CaseState&, Checker&)> check;
  std::function<Metrics(CaseState&, const RegionTimes&)> metrics;
  std::string full_name() const { return suite + "/" + name; }
  std::vector<std::string> fault_names() const;
  bool plants(const std::string& fault) const;                // one of its own (distributed) faults
  const FaultDoc* fault_doc(const std::string& fault) const;  // nullptr when it is not one of them
};

// The typed table a case file fills in.
template <class State>
struct CaseTable {
  std::string suite{}, name{}, summary{};
  bool runs_first = false;
  std::vector<OptionSpec> options{};
  std::vector<FaultDoc> faults{};
  std::vector<KernelFault> kernel_faults{};
  std::vector<std::string> table_metrics{};
  std::function<std::vector<CaseConfig>(const SweepRequest&)> configs{};
  std::function<void(const CaseConfig&)> validate = [](const CaseConfig&) {};
  std::function<MemoryEstimate(const CaseConfig&)> memory;  // required
  std::function<State(CaseContext&)> setup;
  std::vector<std::pair<std::string, std::function<void(State&)>>> timed;
  std::function<void(State&, Checker&)> check;
  std::function<Metrics(State&, const RegionTimes&)> metrics = [](State&, const RegionTimes&) { return Metrics{}; };
};

template <class State>
CaseDef make_case(CaseTable<State> t) {
  struct Holder : CaseState {
    explicit Holder(State s) : state(std::move(s)) {}
    State state;
  };
  auto unwrap = [](CaseState& s) -> State& { return static_cast<Holder&>(s).state; };
  CaseDef def;
  def.suite = t.suite;
  def.name = t.name;
  def.summary = t.summary;
  def.runs_first = t.runs_first;
  def.options = t.options;
  def.faults = t.faults;
  def.kernel_faults = t.kernel_faults;
  def.table_metrics = t.table_metrics;
  def.configs = t.configs;
  def.validate = t.validate;
  def.memory = t.memory;
  def.setup = [setup = t.setup](CaseContext& ctx) -> std::unique_ptr<CaseState> {
    return std::make_unique<Holder>(setup(ctx));
  };
  std::map<std::string, std::function<void(State&)>> regions;
  for (auto& [name, fn] : t.timed) {
    def.regions.push_back(name);
    regions[name] = fn;
  }
  def.run = [regions, unwrap](CaseState& s, const std::string& region) { regions.at(region)(unwrap(s)); };
  def.check = [check = t.check, unwrap](CaseState& s, Checker& c) {
    if (check) check(unwrap(s), c);
  };
  def.metrics = [metrics = t.metrics, unwrap](CaseState& s, const RegionTimes& times) {
    return metrics(unwrap(s), times);
  };
  return def;
}

// The cases a binary knows, in registration order.
class Registry {
 public:
  void add(CaseDef def);
  const std::vector<CaseDef>& cases() const { return cases_; }
  std::vector<std::string> suites() const;
  // Resolves "suite" or "suite/case" patterns ("" or none: everything).
  // Throws UsageError naming an unknown suite or case.
  std::vector<const CaseDef*> select(const std::vector<std::string>& patterns) const;

 private:
  std::vector<CaseDef> cases_;
};

// Every case compiled into this binary, ordered by (suite order, case
// order): the cases registered with SEXTANT_REGISTER_CASE.
Registry all_suites();

// Self-registration: a case file ends with
//   SEXTANT_REGISTER_CASE(kSuiteOrder, 10, gemm_case);
// where gemm_case() returns its CaseDef; a suite whose cases are the rows of
// a table (CP variants, pipeline schedules) registers them all at once,
//   SEXTANT_REGISTER_CASES(kSuiteOrder, 10, variant_cases);
// in the table's order. Suites are linked as object libraries, so every
// registrar runs.
class CaseRegistrar {
 public:
  CaseRegistrar(int suite_order, int case_order, CaseDef (*make)());
  CaseRegistrar(int suite_order, int case_order, std::vector<CaseDef> (*make_all)());
};
#define SEXTANT_CONCAT_INNER(a, b) a##b
#define SEXTANT_CONCAT(a, b) SEXTANT_CONCAT_INNER(a, b)
#define SEXTANT_REGISTER_CASE(suite_order, case_order, make) \
  static const ::sextant::CaseRegistrar SEXTANT_CONCAT(sextant_case_registrar_, __LINE__)(suite_order, case_order, make)
#define SEXTANT_REGISTER_CASES(suite_order, case_order, make_all) \
  SEXTANT_REGISTER_CASE(suite_order, case_order, make_all)

}  // namespace sextant
