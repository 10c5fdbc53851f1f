// Derived metrics and their one definition. Every metric a case records is a
// MetricDef, defined once next to the code that computes it:
//
//   const MetricDef& kBusbw = define_metric({"collectives", "busbw_GBps", "GB/s", Better::higher,
//                                            "bus bandwidth: algbw x the collective's factor (nccl-tests)"});
//   metrics.add(kBusbw, value);
//
// The definitions are the source of results/METRICS.md's metric tables and
// of the regression gate's better-is-higher/lower lists
// (scripts/gen_docs.py reads `sextant list --metrics`); a test fails
// when the generated files drift from the code.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sextant {

enum class Better { higher, lower, neither };
std::string better_name(Better better);  // "higher", "lower", "neither"

struct MetricDef {
  std::string suite;                // "" for metrics the harness adds to every case
  std::string name;                 // key under perf.metrics
  std::string unit;                 // "GB/s", "TFLOP/s", "1" (a fraction or ratio), "s", "B", "json" (structured)
  Better better = Better::neither;  // for the regression gate
  std::string description;          // one line
  std::string case_name = "";       // "" when the metric means the same in every case of the suite
};

// Registers a definition (once per suite, case and name) and returns the stored
// one; call it to initialise a namespace-scope reference.
const MetricDef& define_metric(MetricDef def);
// Every definition, in registration order.
std::vector<MetricDef> metric_definitions();
nlohmann::json metric_definitions_json();

// A case's derived metrics: name -> {value, unit} (or structured JSON).
class Metrics {
 public:
  void add(const MetricDef& def, double value);
  // With extra fields beside value and unit (e.g. "max").
  void add(const MetricDef& def, double value, const nlohmann::json& extra);
  void add_json(const MetricDef& def, nlohmann::json value);
  const nlohmann::json& json() const { return j_; }

 private:
  nlohmann::json j_ = nlohmann::json::object();
};

}  // namespace sextant
