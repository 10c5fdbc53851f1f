#include "harness/resume.h"

#include <map>
#include <set>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {

// FNV-1a over the case ids in plan order: equal plans, equal hashes.
std::string plan_hash(const std::vector<PlannedCase>& plan) {
  uint64_t h = 14695981039346656037ull;
  for (const PlannedCase& p : plan) {
    for (char c : p.config.id() + "\n") {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

std::string shown(const nlohmann::json& value) {
  if (value.is_null()) return "none";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

nlohmann::json describe_plan(const RunOptions& o, const std::vector<PlannedCase>& plan, int world_size,
                             const std::string& backend) {
  nlohmann::json dtypes = nlohmann::json::array();
  for (DType d : o.dtypes) dtypes.push_back(dtype_name(d));
  nlohmann::json problem = o.options;  // as given: the plan's case ids carry the typed values
  for (const RawOption& r : o.raw_options) problem[r.key] = r.value;
  nlohmann::json options = {{"selection", o.selection},
                            {"ranks", plan_rank_counts(plan)},
                            {"dtypes", dtypes},
                            {"parallel", o.parallel ? nlohmann::json(*o.parallel) : nlohmann::json()},
                            {"problem", problem},
                            {"profile", profile_name(o.profile)},
                            {"iters", o.timing.iters},
                            {"warmup", o.timing.warmup},
                            {"seed", o.seed},
                            {"check", o.check},
                            {"device", device_name(o.device)},
                            {"backend", backend},
                            {"fault", o.fault}};
  if (o.fault_magnitude != 0) options["fault_magnitude"] = o.fault_magnitude;
  return {{"world_size", world_size}, {"options", options}, {"cases", plan.size()}, {"ids_hash", plan_hash(plan)}};
}

void require_same_plan(const RunSnapshot& snapshot, const nlohmann::json& plan, const std::string& option,
                       const std::string& path) {
  const std::string where = cat(option, " '", path, "': ");
  const std::string rule = " (a resume runs the same plan with the same options and world size)";
  const nlohmann::json& old = snapshot.plan;
  if (!old.is_object())
    throw UsageError(where + "the file has no run.plan, so its plan cannot be checked (written by an older sextant)");
  if (old.value("world_size", 0) != plan["world_size"].get<int>())
    throw UsageError(cat(where, "its run had world size ", shown(old["world_size"]), ", this run ",
                         plan["world_size"].get<int>(), rule));
  const nlohmann::json& now = plan["options"];
  for (auto it = now.begin(); it != now.end(); ++it) {
    const nlohmann::json before = old["options"].value(it.key(), nlohmann::json());
    if (before != it.value())
      throw UsageError(
          cat(where, "its run had ", it.key(), " ", shown(before), ", this run ", shown(it.value()), rule));
  }
  if (old.value("cases", 0) != plan["cases"].get<int>())
    throw UsageError(cat(where, "its run planned ", shown(old["cases"]), " case instances, this run ",
                         plan["cases"].get<int>(), rule));
  if (old.value("ids_hash", "") != plan["ids_hash"].get<std::string>())
    throw UsageError(where +
                     "its plan holds other case instances than this run's (same options: another sextant "
                     "version?)" +
                     rule);
}

std::vector<PlannedCase> missing_cases(const std::vector<PlannedCase>& plan, const RunSnapshot& snapshot) {
  std::set<std::string> finished;
  for (const nlohmann::json& c : snapshot.cases) finished.insert(c["id"].get<std::string>());
  std::vector<PlannedCase> missing;
  for (const PlannedCase& p : plan)
    if (!finished.count(p.config.id())) missing.push_back(p);
  return missing;
}

nlohmann::json in_plan_order(const std::vector<PlannedCase>& plan, const nlohmann::json& old_cases,
                             const nlohmann::json& new_cases) {
  std::map<std::string, const nlohmann::json*> by_id;
  for (const nlohmann::json* list : {&old_cases, &new_cases})
    for (const nlohmann::json& c : *list) by_id[c["id"].get<std::string>()] = &c;
  nlohmann::json cases = nlohmann::json::array();
  for (const PlannedCase& p : plan) {
    auto it = by_id.find(p.config.id());
    if (it != by_id.end()) cases.push_back(*it->second);
  }
  return cases;
}

}  // namespace sextant
