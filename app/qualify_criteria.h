// `sextant qualify`: the criteria a cluster is judged by, the expectations
// they are held to, and the verdict.
//
// A criterion reads one headline figure from a results document (e.g. the
// all_reduce bus bandwidth of the largest intra-node group at its largest
// message) and compares it with a threshold. Thresholds come from an
// expectations file per device kind (results/expectations/*.toml: a
// fraction of a cited public peak, or an absolute floor) or from a golden
// run of the same cluster (--baseline: its measured value less a
// tolerance). Like nccl-tests' -c checks and Azure's HPC health checks
// (github.com/Azure/azurehpc-health-checks: a busbw floor per VM SKU), a
// criterion passes or fails by its threshold; one that this run could not
// measure (no inter-node group on one node) is reported as not measured and
// does not fail the cluster.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/device.h"

namespace sextant::qualify {

enum class Bound { at_least, at_most };

// Which dtypes the compute criteria read (GPUs: bf16; hosts: f32).
struct Dtypes {
  std::string gemm = "bf16", attention = "bf16";
};

struct Measurement {
  double value = 0;
  std::string from;  // the case id it was read from, or what was counted
};

struct Criterion {
  std::string name;  // key in the expectations file
  std::string what;  // one line for the verdict table
  std::string unit;
  Bound bound = Bound::at_least;
  // The figure, or nullopt with why_not set.
  std::function<std::optional<Measurement>(const nlohmann::json& cases, const Dtypes&, std::string& why_not)> measure;
};
// Every criterion, in verdict order.
const std::vector<Criterion>& criteria();
const Criterion* find_criterion(const std::string& name);

struct Threshold {
  double value = 0;
  std::string source;  // how it was set, with the public source of the peak
};

// A suspect rule of the screen suite (harness/suspects.h) as an
// expectations file sets it: [suspects.<key>] with min_effect and/or mad_k,
// and a note saying why.
struct SuspectOverride {
  std::optional<double> min_effect, mad_k;
  std::string note;
};

struct Expectations {
  std::string path;     // the file (or the golden run)
  std::string name;     // what cluster it describes
  std::string version;  // of the file
  Dtypes dtypes;
  std::map<std::string, Threshold> thresholds;           // by criterion name
  std::map<std::string, SuspectOverride> suspect_rules;  // by rule key
};

// Parses an expectations file (TOML, toml++). UsageError with one line for
// a syntax error, an unknown criterion, rule or key, a threshold that is
// neither `threshold = X` nor `fraction = F` of a peak, a peak without a
// source, or a suspect rule without a note or out of its range.
Expectations read_expectations(const std::string& path);

// The screen's options that carry the expectations' suspect rules into a
// run (<key>_effect, <key>_mad_k), except those in `given` (the user's
// --set wins).
std::vector<std::pair<std::string, double>> suspect_rule_settings(const Expectations& e,
                                                                  const std::vector<std::string>& given);
// The suspect rules a run on `device` judges by: each figure's effect and
// MAD multiple and where they come from (the expectations file with its
// note, the command line, or the rule table with its reason).
nlohmann::json suspect_rules_json(const Expectations& e, Device device, const std::map<std::string, double>& given);

// The expectations file in `dir` whose `match` strings occur in the device
// name (e.g. "H200" in "NVIDIA H200"); device "host" matches host.toml.
// UsageError naming the files tried when none matches.
std::string expectations_for(const std::string& device_name, const std::string& dir);

// Thresholds from a golden run of the same cluster: each criterion it
// measured, less `tolerance` (a fraction: at-least criteria must reach
// value x (1 - tolerance), at-most ones stay under value x (1 + tolerance));
// criteria it did not measure keep `fallback`'s thresholds.
Expectations baseline_expectations(const nlohmann::json& golden, const std::string& path, double tolerance,
                                   const Expectations& fallback);

struct Outcome {
  const Criterion* criterion = nullptr;
  std::string status;  // PASS, FAIL, or NOT MEASURED / NO THRESHOLD
  std::optional<double> measured, threshold, margin_pct;
  std::string from, threshold_source, note;
};
struct Verdict {
  bool pass = true;  // no criterion failed and no suspect was named
  std::vector<Outcome> outcomes;
  // The ranks, links and nodes the screen suite named (harness/results.h
  // suspects_of): each fails the cluster, as it names a part to replace or fix.
  nlohmann::json suspects = nlohmann::json::array();
};

// Judges a results document (its cases; conformance counts every case).
Verdict judge(const nlohmann::json& doc, const Expectations& expectations);
nlohmann::json to_json(const Verdict& verdict, const Expectations& expectations);
// The table printed at the end of a run: criterion, status, measured,
// threshold, margin.
std::string verdict_table(const nlohmann::json& qualification);
// A one-page HTML verdict of a results document holding `qualification`.
std::string verdict_html(const nlohmann::json& doc);

}  // namespace sextant::qualify
