// sextant: the command-line entry point. Owns process-level policy: MPI
// start-up, exit codes (0 all pass, 1 a case failed, 2 bad input, 3 a
// timeout), and the subcommands (app/run_command.cc runs cases under the
// watchdog and the journal). Everything else is library code.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "app/plan_command.h"
#include "app/qualify_command.h"
#include "app/recover_command.h"
#include "app/run_command.h"
#include "harness/error.h"
#include "harness/kernel_fault.h"
#include "harness/strings.h"
#include "harness/suspects.h"
#include "harness/tolerance.h"

using namespace sextant;

namespace {

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

// `sextant list --options`: every option of the selected cases.
void list_options(const std::vector<const CaseDef*>& cases) {
  for (const CaseDef* c : cases) {
    std::cout << c->full_name() << "\n";
    for (const OptionSpec& o : c->options)
      std::cout << "  " << o.name << std::string(o.name.size() < 18 ? 18 - o.name.size() : 1, ' ') << o.rule() << ": "
                << o.help << "\n";
  }
}

// `sextant list --tolerances`: the tolerance table, the planted kernel faults
// and the suspect rules of the screen, as JSON.
nlohmann::json tolerances_json() {
  nlohmann::json rows = nlohmann::json::array(), faults = nlohmann::json::array();
  for (const ToleranceRow& r : tolerance_table()) {
    nlohmann::json row = {{"op", r.name},
                          {"storage_roundings", r.storage_roundings},
                          {"accumulation_growth", r.accumulation_growth},
                          {"reason", r.reason}};
    for (DType d : {DType::f32, DType::bf16, DType::f16}) {
      row["gate"][dtype_name(d)] = baseline_gate(d, r.op);
      row["floor"][dtype_name(d)] = expected_error(d, r.op);
    }
    rows.push_back(row);
  }
  nlohmann::json fp8_rows = nlohmann::json::array();
  for (const QuantizedRow& r : fp8_tolerance_table()) {
    nlohmann::json row = {{"op", r.name},
                          {"class", op_class_name(r.op)},
                          {"quantization_growth", r.quantization_growth},
                          {"reason", r.reason}};
    // Forward (E4M3 x E4M3) and backward under the hybrid formats (E5M2 x E4M3).
    for (DType d : {DType::f32, DType::bf16}) {
      row["expected"]["e4m3_e4m3"][dtype_name(d)] = fp8_bound(r.op, {0x1p-4, 0x1p-4}, d).gate / kGateHeadroom;
      row["expected"]["e5m2_e4m3"][dtype_name(d)] = fp8_bound(r.op, {0x1p-3, 0x1p-4}, d).gate / kGateHeadroom;
    }
    fp8_rows.push_back(row);
  }
  const TensorCoreRow& tc = fp8_tensor_core_row();
  nlohmann::json tensor_core = {{"op", tc.name}, {"accumulator_bits", tc.accumulator_bits}, {"reason", tc.reason}};
  for (DType d : {DType::f32, DType::bf16}) {
    tensor_core["floor"][dtype_name(d)] = fp8_tensor_core_bound(d).floor;
    tensor_core["gate"][dtype_name(d)] = fp8_tensor_core_bound(d).gate;
  }
  for (const KernelFaultInfo& f : kernel_faults())
    faults.push_back(
        {{"name", f.name}, {"family", f.family}, {"bug", f.bug}, {"cuda", f.cuda}, {"in_baseline", f.in_baseline}});
  const SystematicRule& sy = systematic_rule();
  nlohmann::json norm_only = nlohmann::json::array(), min_effect;
  for (OpClass op : sy.norm_bound_only) norm_only.push_back(op_class_name(op));
  for (const ToleranceRow& r : tolerance_table())
    if (sy.applies_to(r.op))
      for (DType d : {DType::f32, DType::bf16, DType::f16})
        min_effect[r.name][dtype_name(d)] = systematic_min_effect(d, r.op);
  const nlohmann::json systematic = {{"k", sy.k},
                                     {"min_effect_fraction", sy.min_effect_fraction},
                                     {"groups", sy.groups},
                                     {"min_elements", sy.min_elements},
                                     {"reason", sy.reason},
                                     {"norm_bound_only", norm_only},
                                     {"norm_bound_only_reason", sy.norm_bound_only_reason},
                                     {"min_effect", min_effect}};
  const TrainingGrowthRule& tg = training_growth_rule();
  const nlohmann::json training = {{"per_layer", tg.per_layer},
                                   {"lr_steps", tg.lr_steps},
                                   {"depth_reason", tg.depth_reason},
                                   {"steps_reason", tg.steps_reason}};
  nlohmann::json suspects = nlohmann::json::array();
  for (const SuspectRule& r : suspect_rules())
    suspects.push_back({{"figure", r.figure},
                        {"key", r.key},
                        {"device", rule_device_name(r.device)},
                        {"min_effect", r.min_effect},
                        {"mad_k", r.mad_k},
                        {"worse", r.worse == Worse::lower ? "lower" : "higher"},
                        {"rule", describe_rule(r)},
                        {"reason", r.reason}});
  return {{"gate_headroom", kGateHeadroom}, {"rows", rows},
          {"fp8_rows", fp8_rows},           {"fp8_tensor_core", tensor_core},
          {"systematic", systematic},       {"training_growth", training},
          {"kernel_faults", faults},        {"suspect_rules", suspects}};
}

int do_list(const std::vector<std::string>& selection, bool options, bool metrics, bool tolerances) {
  require(int{options} + int{metrics} + int{tolerances} <= 1, "list takes one of --options, --metrics, --tolerances");
  require(!(metrics || tolerances) || selection.empty(),
          cat("list ", metrics ? "--metrics" : "--tolerances", " lists everything and takes no selection (got '",
              join(selection, " "), "')"));
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return 0;
  Registry registry = all_suites();
  if (metrics || tolerances) {  // JSON, for scripts/gen_docs.py
    std::cout << (metrics ? metric_definitions_json() : tolerances_json()).dump(1) << "\n";
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
    if (!c->faults.empty()) std::cout << "      distributed faults: " << join(c->fault_names(), ", ") << "\n";
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

  CLI::App app{
      "sextant: conformance and benchmark suite for 6D-parallel transformer training kernels.\n"
      "Every distributed kernel is checked against a float64 single-device reference and timed.",
      "sextant"};
  app.footer(
      "Examples:\n"
      "  mpirun -np 4 sextant run                      all suites at 1, 2 and 4 ranks\n"
      "  mpirun -np 4 sextant run collectives          busbw table like nccl-tests\n"
      "  mpirun -np 8 sextant run attention --cp 4 --tp 2 --seq 4096\n"
      "  sextant list                                  suites, cases and planted faults\n"
      "  mpirun -np 8 sextant qualify                  cluster verdict: PASS/FAIL per headline figure\n"
      "  sextant plan --model llama3-405b --gpus 16384 --global-batch 2048   pick a parallel config\n"
      "  sextant recover out/sextant-<run id>.journal  results of a run whose rank 0 was killed\n"
      "Results are JSON (schema results/schema.json); scripts/report.py turns them into plots.");
  app.require_subcommand(1);
  std::vector<std::string> list_selection;
  bool list_opts = false, list_metrics = false, list_tolerances = false;
  CLI::App* list = app.add_subcommand("list", "List suites, cases and their planted faults");
  list->add_option("selection", list_selection, "Suites or suite/case");
  list->add_flag("--options", list_opts, "Each case's options: name, rule (type, range or choices) and help");
  list->add_flag("--metrics", list_metrics, "Every metric definition as JSON (unit, better, description)");
  list->add_flag("--tolerances", list_tolerances,
                 "The tolerance table, the planted kernel faults and the suspect rules as JSON");
  RunFlags flags;
  CLI::App* run = app.add_subcommand("run", "Run cases: check against the reference, time, write results JSON");
  add_run_flags(*run, flags);
  std::string resume;
  add_interruption_options(*run, resume);
  std::string config_path;
  CLI::Option* config = run->add_option("--config", config_path,
                                        "Read options from a TOML file: flag names and case options as keys "
                                        "(command-line flags win)");
  RunFlags qualify_flags;
  QualifyFlags qualify_options;
  CLI::App* qualify = add_qualify_command(app, qualify_flags, qualify_options);
  add_comm_option_to(*qualify);
  CLI::App* plan = add_plan_command(app);
  CLI::App* recover = add_recover_command(app);
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
    if (list->parsed()) code = do_list(list_selection, list_opts, list_metrics, list_tolerances);
    else if (run->parsed()) code = run_command(flags, resume, command_line(argc, argv));
    else if (qualify->parsed()) code = run_qualify_command(qualify_flags, qualify_options, command_line(argc, argv));
    else if (plan->parsed()) code = run_plan_command();
    else if (recover->parsed()) code = run_recover_command();
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
