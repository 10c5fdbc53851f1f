#include "app/qualify_command.h"

#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "app/qualify_criteria.h"
#include "app/run_command.h"
#include "harness/comm_mpi.h"
#include "harness/device.h"
#include "harness/error.h"
#include "harness/peaks.h"
#include "harness/results.h"
#include "harness/strings.h"
#include "harness/suspects.h"
#include "harness/topology.h"

namespace fs = std::filesystem;

namespace sextant {

namespace {

constexpr const char* kFooter =
    "Criteria (thresholds: results/expectations/<device>.toml, or --baseline GOLDEN.json):\n"
    "  conformance (every case passes); all_reduce, all_gather, reduce_scatter, sendrecv and all_to_all_v\n"
    "  busbw and sendrecv latency per group kind (intra-node: the first node's ranks; inter-node: the\n"
    "  world on several nodes); ops/gemm and ops/attention TFLOP/s; step/train MFU; the pipeline's\n"
    "  measured bubble against the simulator. A criterion the run could not measure (inter-node on one\n"
    "  node) is reported NOT MEASURED and does not fail the cluster.\n"
    "Default sizes: --profile qualify with --device cuda, default on CPUs; ranks 1 (single-device ops),\n"
    "the first node's ranks and the world.\n"
    "Exit status: 0 no criterion failed; 1 one did; 2 bad input; 3 a case exceeded --timeout.";

// Where the expectations files are: $SEXTANT_EXPECTATIONS_DIR, the source
// tree the binary was built from, or expectations/ beside a bundle's bin/.
std::string expectations_dir() {
  if (const char* env = std::getenv("SEXTANT_EXPECTATIONS_DIR")) return env;
  const fs::path source = fs::path(SEXTANT_SOURCE_DIR) / "results" / "expectations";
  std::error_code ec;
  if (fs::is_directory(source, ec)) return source.string();
  return (fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "expectations").string();
}

// The device name expectations are matched against.
std::string expected_device(Device device) {
  if (device == Device::host) return "host";
  const std::vector<DeviceInfo> gpus = describe_cuda_devices();
  return gpus.empty() ? "cuda" : gpus.front().name;
}

qualify::Expectations resolve_expectations(const QualifyFlags& q, Device device) {
  qualify::Expectations file;
  if (!q.expectations.empty()) {
    file = qualify::read_expectations(q.expectations);
  } else {
    try {
      file = qualify::read_expectations(qualify::expectations_for(expected_device(device), expectations_dir()));
    } catch (const UsageError&) {
      if (q.baseline.empty()) throw;  // a golden run alone is enough
    }
  }
  require(q.tolerance >= 0 && q.tolerance < 1, cat("--baseline-tolerance ", q.tolerance, " must be in [0, 1)"));
  if (q.baseline.empty()) return file;
  if (file.path.empty()) file.dtypes = device == Device::host ? qualify::Dtypes{"f32", "f32"} : qualify::Dtypes{};
  return qualify::baseline_expectations(read_results_file(q.baseline, "--baseline"), q.baseline, q.tolerance, file);
}

// Rank 0 reads the expectations; a bad file ends every rank with exit 2.
qualify::Expectations agreed_expectations(MpiCommunicator& world, const QualifyFlags& q, Device device) {
  qualify::Expectations e;
  std::string error;
  if (world.rank() == 0) {
    try {
      e = resolve_expectations(q, device);
    } catch (const UsageError& u) {
      error = u.what();
    }
  }
  for (const std::string& message : all_gather_strings(world, error))
    if (!message.empty()) throw UsageError(message);
  return e;
}

// The user's --set values of suspect rule options (they win over the
// expectations file's).
std::map<std::string, double> given_rule_options(const RunFlags& flags) {
  std::map<std::string, double> out;
  for (const RawOption& r : flags.problem)
    for (const std::string& key : suspect_rule_keys())
      if (r.key == key + "_effect" || r.key == key + "_mad_k") try {
          out[r.key] = r.value.is_number() ? r.value.get<double>() : std::stod(r.value.get<std::string>());
        } catch (const std::exception&) {
          out[r.key] = 0;  // the run refuses it with its rule
        }
  return out;
}

// The expectations' suspect rules as options of the screen cases, the same
// on every rank (only rank 0 read the file).
void add_suspect_rule_options(MpiCommunicator& world, const qualify::Expectations& e, RunFlags& flags) {
  std::vector<std::string> given;
  for (const auto& [key, value] : given_rule_options(flags)) given.push_back(key);
  nlohmann::json settings = nlohmann::json::object();
  if (world.rank() == 0)
    for (const auto& [option, value] : qualify::suspect_rule_settings(e, given)) settings[option] = value;
  settings = nlohmann::json::parse(all_gather_strings(world, settings.dump()).front());
  for (auto it = settings.begin(); it != settings.end(); ++it)
    flags.problem.push_back({it.key(), it.value(), cat(e.path, ": suspects (", it.key(), ")"), true});
}

// 1, the first node's ranks and the world: single-device ops, an
// intra-node group, and (on several nodes) an inter-node one.
std::string default_rank_counts(const NodeMap& nodes) {
  std::set<int> counts = {1, ranks_per_node(nodes).front(), static_cast<int>(nodes.size())};
  std::vector<std::string> out;
  for (int c : counts) out.push_back(std::to_string(c));
  return join(out, ",");
}

}  // namespace

CLI::App* add_qualify_command(CLI::App& app, RunFlags& flags, QualifyFlags& q) {
  CLI::App* sub = app.add_subcommand(
      "qualify", "Qualify a cluster: every suite, conformance, and a PASS/FAIL verdict per headline figure");
  add_run_flags(*sub, flags);
  flags.profile = "";  // chosen by the device unless given
  sub->add_option("--expectations", q.expectations,
                  "Thresholds (TOML; default: the file in results/expectations matching the device)")
      ->type_name("FILE")
      ->group("Qualification");
  CLI::Option* baseline =
      sub->add_option("--baseline", q.baseline,
                      "A golden results file of the same cluster: each criterion it measured, less the tolerance, "
                      "is the threshold")
          ->type_name("FILE")
          ->group("Qualification");
  sub->add_option("--baseline-tolerance", q.tolerance, "Fraction a figure may fall below its golden value (0.10)")
      ->needs(baseline)
      ->group("Qualification");
  sub->footer(kFooter);
  return sub;
}

int run_qualify_command(RunFlags flags, const QualifyFlags& q, const std::string& command_line) {
  auto world = MpiCommunicator::world();
  const Device device = parse_device(flags.device);
  if (flags.profile.empty())
    flags.profile = profile_name(device == Device::cuda ? Profile::qualify : Profile::standard);
  if (!flags.ranks) flags.ranks = default_rank_counts(detect_nodes(*world));
  const qualify::Expectations expectations = agreed_expectations(*world, q, device);
  const std::map<std::string, double> given_rules = given_rule_options(flags);
  add_suspect_rule_options(*world, expectations, flags);
  const std::string header =
      cat("# qualify: profile ", flags.profile, ", ranks ", *flags.ranks, ", expectations ", expectations.path);
  auto judge = [&](nlohmann::json& doc, const std::string& base) {
    const qualify::Verdict verdict = qualify::judge(doc, expectations);
    doc["qualification"] = qualify::to_json(verdict, expectations);
    doc["qualification"]["suspect_rules"] = qualify::suspect_rules_json(expectations, device, given_rules);
    std::cout << qualify::verdict_table(doc["qualification"]);
    if (!base.empty()) {
      const std::string html = base + "-verdict.html";
      std::ofstream(html) << qualify::verdict_html(doc);
      doc["qualification"]["html"] = fs::path(html).filename().string();
      std::cout << "# verdict: " << html << "\n";
    }
    std::cout << std::flush;
    return verdict.pass ? 0 : 1;
  };
  return run_command(flags, "", command_line, judge, header);
}

}  // namespace sextant
