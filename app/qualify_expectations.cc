// Expectations files (TOML) and golden runs: where qualify's thresholds
// come from. The file format, as results/expectations/h200.toml uses it:
//
//   schema = "sextant.expectations/1"
//   name = "NVIDIA H200 SXM, 8 per node on NVSwitch, ..."
//   version = "2026-12-01"
//   match = ["H200"]                 # device names this file is for
//   gemm_dtype = "bf16"              # the dtype the compute criteria read
//   attention_dtype = "bf16"
//   [peaks.nvlink_GBps]              # a public figure, cited
//   value = 450
//   source = "NVIDIA H200 datasheet: ..."
//   [criteria.all_reduce_busbw_intra_GBps]
//   fraction = 0.85                  # of a peak ...
//   of = "nvlink_GBps"
//   [criteria.p2p_latency_intra_us]
//   threshold = 50                   # ... or absolute
//   note = "why this number"
#include <cmath>
#include <filesystem>

#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include "app/qualify_criteria.h"
#include "harness/error.h"
#include "harness/options.h"
#include "harness/strings.h"
#include "harness/suspects.h"

namespace fs = std::filesystem;

namespace sextant::qualify {

namespace {

const std::vector<std::string> kTopKeys = {"schema",          "name",  "version",  "match",   "gemm_dtype",
                                           "attention_dtype", "peaks", "criteria", "suspects"};

void require_known_keys(const toml::table& t, const std::vector<std::string>& known, const std::string& where) {
  for (const auto& [key, node] : t) {
    const std::string k(key.str());
    require(std::find(known.begin(), known.end(), k) != known.end(),
            cat(where, ": unknown key '", k, "'", did_you_mean(k, known), " (known: ", join(known, ", "), ")"));
  }
}

std::string text(const toml::table& t, const std::string& key, const std::string& where, bool required = true) {
  if (auto v = t[key].value<std::string>()) return *v;
  if (auto v = t[key].value<int64_t>()) return std::to_string(*v);  // version = 2
  require(!required, cat(where, ": '", key, "' must be a string"));
  return "";
}

double positive(const toml::node_view<const toml::node>& node, const std::string& where) {
  const std::optional<double> v = node.value<double>();
  require(v && std::isfinite(*v) && *v >= 0, cat(where, " must be a number at least 0"));
  return *v;
}

struct Peak {
  double value = 0;
  std::string source;
};

std::map<std::string, Peak> read_peaks(const toml::table& root, const std::string& path) {
  std::map<std::string, Peak> peaks;
  const toml::table* table = root["peaks"].as_table();
  if (!table) return peaks;
  for (const auto& [key, node] : *table) {
    const std::string name(key.str()), where = cat(path, ": peaks.", name);
    const toml::table* peak = node.as_table();
    require(peak != nullptr, cat(where, " must be a table with value and source"));
    require_known_keys(*peak, {"value", "source"}, where);
    require(peak->contains("source"), cat(where, ".source must cite where the figure comes from"));
    Peak p{positive((*peak)["value"], where + ".value"), text(*peak, "source", where)};
    require(p.value > 0, cat(where, ".value must be positive"));
    require(!p.source.empty(), cat(where, ".source must cite where the figure comes from"));
    peaks[name] = p;
  }
  return peaks;
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

Threshold read_threshold(const toml::table& t, const std::map<std::string, Peak>& peaks, const std::string& where) {
  require_known_keys(t, {"threshold", "fraction", "of", "note"}, where);
  const std::string note = text(t, "note", where, false);
  const std::string suffix = note.empty() ? "" : cat("; ", note);
  const bool absolute = t.contains("threshold"), relative = t.contains("fraction") || t.contains("of");
  require(absolute != relative, cat(where, " must give either threshold = X or fraction = F with of = \"<peak>\""));
  if (absolute) return {positive(t["threshold"], where + ".threshold"), cat("absolute", suffix)};
  const double fraction = positive(t["fraction"], where + ".fraction");
  const std::string of = text(t, "of", where);
  auto peak = peaks.find(of);
  require(peak != peaks.end(), cat(where, ".of = '", of, "' names no [peaks.", of, "] table"));
  return {fraction * peak->second.value, cat(format_number(fraction), " x ", of, " ", format_number(peak->second.value),
                                             " (", peak->second.source, ")", suffix)};
}

std::map<std::string, SuspectOverride> read_suspect_rules(const toml::table& root, const std::string& path) {
  std::map<std::string, SuspectOverride> out;
  const toml::table* table = root["suspects"].as_table();
  if (!table) return out;
  const std::vector<std::string> known = suspect_rule_keys();
  for (const auto& [key, node] : *table) {
    const std::string name(key.str()), where = cat(path, ": suspects.", name);
    require(is_suspect_rule_key(name),
            cat(where, ": no such suspect rule", did_you_mean(name, known), " (known: ", join(known, ", "), ")"));
    const toml::table* t = node.as_table();
    require(t != nullptr, cat(where, " must be a table with min_effect and/or mad_k, and a note"));
    require_known_keys(*t, {"min_effect", "mad_k", "note"}, where);
    SuspectOverride o;
    if (t->contains("min_effect")) {
      o.min_effect = positive((*t)["min_effect"], where + ".min_effect");
      require(*o.min_effect >= 0.01 && *o.min_effect <= 0.99, cat(where, ".min_effect must be in [0.01, 0.99]"));
    }
    if (t->contains("mad_k")) {
      o.mad_k = positive((*t)["mad_k"], where + ".mad_k");
      require(*o.mad_k <= 1000, cat(where, ".mad_k must be in [0, 1000]"));
    }
    require(o.min_effect || o.mad_k, cat(where, " must set min_effect or mad_k"));
    o.note = text(*t, "note", where, false);
    require(!o.note.empty(), cat(where, ".note must say why these values"));
    out[name] = o;
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, double>> suspect_rule_settings(const Expectations& e,
                                                                  const std::vector<std::string>& given) {
  std::vector<std::pair<std::string, double>> out;
  auto add = [&](const std::string& option, const std::optional<double>& v) {
    if (v && std::find(given.begin(), given.end(), option) == given.end()) out.emplace_back(option, *v);
  };
  for (const auto& [key, o] : e.suspect_rules) {
    add(key + "_effect", o.min_effect);
    add(key + "_mad_k", o.mad_k);
  }
  return out;
}

nlohmann::json suspect_rules_json(const Expectations& e, Device device, const std::map<std::string, double>& given) {
  // The options the screen cases got: the file's, and the user's over them.
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [option, value] : suspect_rule_settings(e, {})) options[option] = value;
  for (const auto& [option, value] : given) options[option] = value;
  nlohmann::json out = nlohmann::json::array();
  const RuleDevice kind = device == Device::host ? RuleDevice::host : RuleDevice::cuda;
  for (const SuspectRule& table : suspect_rules()) {
    if (table.device != RuleDevice::any && table.device != kind) continue;
    const SuspectRule r = configured_rule(table.figure, device, options);
    std::vector<std::string> sources;
    if (auto it = e.suspect_rules.find(r.key); it != e.suspect_rules.end())
      sources.push_back(cat(e.path, " [suspects.", r.key, "]: ", it->second.note));
    for (const char* suffix : {"_effect", "_mad_k"})
      if (given.count(r.key + suffix)) sources.push_back(cat("--set ", r.key, suffix));
    out.push_back({{"figure", r.figure},
                   {"key", r.key},
                   {"min_effect", r.min_effect},
                   {"mad_k", r.mad_k},
                   {"rule", describe_rule(r)},
                   {"source", sources.empty() ? cat("rule table: ", table.reason) : join(sources, "; ")}});
  }
  return out;
}

Expectations read_expectations(const std::string& path) {
  std::error_code ec;
  require(fs::is_regular_file(path, ec), cat("--expectations '", path, "' is not a readable file"));
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw UsageError(cat("--expectations '", path, "': line ", e.source().begin.line, ", column ",
                         e.source().begin.column, ": ", std::string(e.description())));
  }
  require_known_keys(root, kTopKeys, path);
  require(text(root, "schema", path) == "sextant.expectations/1",
          cat(path, ": schema must be \"sextant.expectations/1\""));
  Expectations e;
  e.path = path;
  e.name = text(root, "name", path);
  e.version = text(root, "version", path);
  if (root.contains("gemm_dtype")) e.dtypes.gemm = text(root, "gemm_dtype", path);
  if (root.contains("attention_dtype")) e.dtypes.attention = text(root, "attention_dtype", path);
  const std::map<std::string, Peak> peaks = read_peaks(root, path);
  const toml::table* table = root["criteria"].as_table();
  require(table != nullptr, cat(path, ": a [criteria.<name>] table is required"));
  std::vector<std::string> known;
  for (const Criterion& c : criteria()) known.push_back(c.name);
  for (const auto& [key, node] : *table) {
    const std::string name(key.str()), where = cat(path, ": criteria.", name);
    require(find_criterion(name) != nullptr,
            cat(where, ": no such criterion", did_you_mean(name, known), " (known: ", join(known, ", "), ")"));
    const toml::table* t = node.as_table();
    require(t != nullptr, cat(where, " must be a table"));
    e.thresholds[name] = read_threshold(*t, peaks, where);
  }
  e.suspect_rules = read_suspect_rules(root, path);
  return e;
}

std::string expectations_for(const std::string& device_name, const std::string& dir) {
  std::vector<std::string> tried;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    tried.push_back(f.filename().string());
    toml::table root;
    try {
      root = toml::parse_file(f.string());
    } catch (const toml::parse_error&) {
      continue;  // read_expectations reports it when the file is named
    }
    if (const toml::array* match = root["match"].as_array())
      for (const toml::node& m : *match)
        if (auto s = m.value<std::string>(); s && device_name.find(*s) != std::string::npos) return f.string();
  }
  throw UsageError(cat("no expectations file in '", dir, "' matches the device '", device_name, "' (tried ",
                       tried.empty() ? std::string("none") : join(tried, ", "),
                       "): give --expectations FILE or --baseline RESULTS.json"));
}

Expectations baseline_expectations(const nlohmann::json& golden, const std::string& path, double tolerance,
                                   const Expectations& fallback) {
  Expectations e = fallback;
  e.path = path;
  e.name = cat("golden run ", golden["run"].value("id", std::string("?")),
               fallback.path.empty() ? std::string() : cat(" (else ", fallback.path, ")"));
  e.version = golden["run"].value("start", std::string());
  for (const Criterion& c : criteria()) {
    // Every case must pass, and the bubble must match the simulator, whatever the golden run did.
    if (c.name == "conformance" || c.name == "pipeline_bubble_gap") continue;
    std::string why_not;
    const std::optional<Measurement> m = c.measure(golden.at("cases"), e.dtypes, why_not);
    if (!m) continue;
    const double factor = c.bound == Bound::at_least ? 1 - tolerance : 1 + tolerance;
    e.thresholds[c.name] = {m->value * factor, cat("golden run ", format_number(m->value), (factor < 1 ? " - " : " + "),
                                                   format_number(100 * tolerance), "% (", m->from, ")")};
  }
  return e;
}

}  // namespace sextant::qualify
