#include "harness/metrics.h"

#include <cmath>
#include <deque>
#include <mutex>

#include "harness/error.h"

namespace sextant {

std::string better_name(Better better) {
  switch (better) {
    case Better::higher: return "higher";
    case Better::lower: return "lower";
    case Better::neither: return "neither";
  }
  return "neither";
}

namespace {
// Stable addresses: definitions are handed out by reference.
std::deque<MetricDef>& registry() {
  static std::deque<MetricDef> defs;
  return defs;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

const MetricDef& define_metric(MetricDef def) {
  std::lock_guard lock(registry_mutex());
  for (const MetricDef& d : registry())
    if (d.suite == def.suite && d.case_name == def.case_name && d.name == def.name)
      throw RuntimeError("metric defined twice: " + def.suite + "/" + def.case_name + " " + def.name);
  if (def.name.empty() || def.unit.empty() || def.description.empty())
    throw RuntimeError("metric " + def.suite + "/" + def.name + " needs a name, a unit and a description");
  registry().push_back(std::move(def));
  return registry().back();
}

std::vector<MetricDef> metric_definitions() {
  std::lock_guard lock(registry_mutex());
  return {registry().begin(), registry().end()};
}

nlohmann::json metric_definitions_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const MetricDef& d : metric_definitions())
    out.push_back({{"suite", d.suite},
                   {"name", d.name},
                   {"unit", d.unit},
                   {"better", better_name(d.better)},
                   {"description", d.description},
                   {"case", d.case_name}});
  return out;
}

void Metrics::add(const MetricDef& def, double value) { add(def, value, nlohmann::json::object()); }

void Metrics::add(const MetricDef& def, double value, const nlohmann::json& extra) {
  nlohmann::json entry = {{"value", std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr)},
                          {"unit", def.unit}};
  for (auto it = extra.begin(); it != extra.end(); ++it) entry[it.key()] = it.value();
  j_[def.name] = std::move(entry);
}

void Metrics::add_json(const MetricDef& def, nlohmann::json value) { j_[def.name] = std::move(value); }

}  // namespace sextant
