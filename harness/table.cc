#include "harness/table.h"

#include <cmath>
#include <cstdio>

#include "harness/strings.h"

namespace sextant {

namespace {
std::string fixed(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, value);
  return buf;
}
// Left-aligned in `width` columns, and always followed by at least one space.
std::string pad(std::string s, size_t width) {
  s.append(s.size() < width ? width - s.size() : 1, ' ');
  return s;
}
std::string lpad(const std::string& s, size_t width) {
  return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
}
std::string params_label(const nlohmann::json& params) {
  std::string out;
  for (auto it = params.begin(); it != params.end(); ++it) {
    std::string v = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    if (it.key() == "bytes") v = format_bytes(it.value().get<double>());
    out += cat(out.empty() ? "" : " ", it.key(), "=", v);
  }
  return out;
}
std::string metric_name(const std::string& key) {
  size_t us = key.rfind('_');
  return us == std::string::npos ? key : key.substr(0, us);
}
}  // namespace

std::string table_header(const CaseDef& def) {
  std::string h = cat("# ", def.full_name(), ": ", def.summary, "\n# ", pad("progress", 10), pad("ranks", 6),
                      pad("config", 28), pad("dtype", 6), lpad("time(us)", 12));
  for (const std::string& m : def.table_metrics) h += lpad(metric_name(m), 12);
  h += "  check";
  return h;
}

std::string table_row(const CaseDef& def, const CaseRecord& r, size_t index, size_t total) {
  std::string row = cat("  ", pad(cat("[", index, "/", total, "]"), 10), pad(std::to_string(r.config.ranks), 6),
                        pad(to_string(r.config.parallel), 28), pad(dtype_name(r.config.dtype), 6));
  const std::string primary = def.regions.empty() ? "" : def.regions.front();
  auto t = r.times.find(primary);
  row += lpad(t == r.times.end() ? "-" : fixed("%.1f", t->second.median * 1e6), 12);
  for (const std::string& m : def.table_metrics) {
    auto it = r.metrics.find(m);
    bool have = it != r.metrics.end() && it->contains("value") && !(*it)["value"].is_null();
    row += lpad(have ? fixed("%.3g", (*it)["value"].get<double>()) : "-", 12);
  }
  const Conformance& c = r.conformance;
  std::string check = c.status;
  if (c.checked > 0) check += cat(" #wrong ", c.wrong);
  double worst = 0;
  for (const TensorCheck& tc : c.tensors) {
    if (tc.bound > 0) worst = std::max(worst, std::isfinite(tc.error) ? tc.error / tc.bound : 1e9);
    if (tc.base_bound > 0) worst = std::max(worst, std::isfinite(tc.base_error) ? tc.base_error / tc.base_bound : 1e9);
  }
  if (!c.tensors.empty()) check += " err/bound " + fixed("%.2g", worst);
  if (!r.skip_reason.empty()) check = "SKIPPED " + r.skip_reason;
  else if (!r.error.empty()) check = "ERROR " + r.error;
  else if (!c.failures.empty()) check += " (" + c.failures.front() + ")";
  row += "  " + check + "  " + params_label(r.config.params);
  return row;
}

std::string table_summary(const std::vector<CaseRecord>& records) {
  int pass = 0, fail = 0, skip = 0, error = 0, skipped = 0;
  for (const CaseRecord& r : records) {
    if (!r.skip_reason.empty()) ++skipped;
    else if (!r.error.empty()) ++error;
    else if (r.conformance.status == kPass) ++pass;
    else if (r.conformance.status == kFail) ++fail;
    else ++skip;
  }
  return cat("# ", records.size(), " cases: ", pass, " pass, ", fail, " fail, ", skip, " not checked, ", error,
             " errors", skipped ? cat(", ", skipped, " skipped (do not fit the rank count or memory)") : std::string());
}

}  // namespace sextant
