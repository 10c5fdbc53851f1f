#include "app/qualify_criteria.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "harness/results.h"
#include "harness/strings.h"

namespace sextant::qualify {

namespace {

// A case whose figures count: it ran, passed its check, and plants no fault.
bool usable(const nlohmann::json& c) {
  return !c.contains("error") && !c.contains("skipped") && c.value("fault", nlohmann::json()).is_null() &&
         c["conformance"].value("status", "") == "pass";
}

// A numeric metric of a case, NaN when absent or null.
double metric(const nlohmann::json& c, const std::string& name) {
  const nlohmann::json& m = c["perf"]["metrics"];
  if (!m.contains(name)) return NAN;
  const nlohmann::json& v = m[name].is_object() ? m[name].value("value", nlohmann::json()) : m[name];
  return v.is_number() ? v.get<double>() : NAN;
}

double median_time(const nlohmann::json& c, const std::string& region) {
  const nlohmann::json& t = c["perf"]["time"];
  return t.contains(region) ? t[region].value("median", std::nan("")) : NAN;
}

std::vector<const nlohmann::json*> usable_cases(const nlohmann::json& cases, const std::string& suite,
                                                const std::string& name) {
  std::vector<const nlohmann::json*> out;
  for (const nlohmann::json& c : cases)
    if (c["suite"] == suite && (name.empty() || c["case"] == name) && usable(c)) out.push_back(&c);
  return out;
}

// The best value of f over the cases (NaN ignored), with the case it came from.
std::optional<Measurement> best(const std::vector<const nlohmann::json*>& cases,
                                const std::function<double(const nlohmann::json&)>& f, Bound bound) {
  std::optional<Measurement> out;
  for (const nlohmann::json* c : cases) {
    const double v = f(*c);
    if (!std::isfinite(v)) continue;
    if (!out || (bound == Bound::at_least ? v > out->value : v < out->value))
      out = Measurement{v, (*c)["id"].get<std::string>()};
  }
  return out;
}

// A collective's cases of one group kind at their largest group and, among
// those, at the largest (or smallest) message: what nccl-tests' table
// reports in its last (first) row.
std::vector<const nlohmann::json*> collective_row(const nlohmann::json& cases, const std::string& op, bool inter,
                                                  bool largest_message, std::string& why_not) {
  std::vector<const nlohmann::json*> kind;
  for (const nlohmann::json* c : usable_cases(cases, "collectives", op)) {
    const double nodes = metric(*c, "group_nodes");
    if ((*c)["params"].value("group_size", 1) > 1 && std::isfinite(nodes) && (nodes > 1) == inter) kind.push_back(c);
  }
  if (kind.empty()) {
    why_not = cat("no passing collectives/", op, " case on an ", inter ? "inter" : "intra",
                  "-node group of 2 or more ranks", inter ? " (one node: run on several to measure it)" : "");
    return {};
  }
  int64_t size = 0, bytes = largest_message ? 0 : INT64_MAX;
  for (const nlohmann::json* c : kind) size = std::max<int64_t>(size, (*c)["params"]["group_size"].get<int64_t>());
  for (const nlohmann::json* c : kind)
    if ((*c)["params"]["group_size"] == size)
      bytes = largest_message ? std::max<int64_t>(bytes, (*c)["params"]["bytes"].get<int64_t>())
                              : std::min<int64_t>(bytes, (*c)["params"]["bytes"].get<int64_t>());
  std::vector<const nlohmann::json*> row;
  for (const nlohmann::json* c : kind)
    if ((*c)["params"]["group_size"] == size && (*c)["params"]["bytes"] == bytes) row.push_back(c);
  return row;
}

Criterion busbw(const std::string& op, const std::string& label, bool inter) {
  const std::string kind = inter ? "inter" : "intra";
  return {cat(op, "_busbw_", kind, "_GBps"), cat(label, " busbw, ", kind, "-node group, largest message"), "GB/s",
          Bound::at_least, [op, inter](const nlohmann::json& cases, const Dtypes&, std::string& why_not) {
            return best(
                collective_row(cases, op, inter, true, why_not),
                [](const nlohmann::json& c) { return metric(c, "busbw_GBps"); }, Bound::at_least);
          }};
}

Criterion p2p_latency(bool inter) {
  const std::string kind = inter ? "inter" : "intra";
  return {cat("p2p_latency_", kind, "_us"), cat("sendrecv time of the smallest message, ", kind, "-node group"), "us",
          Bound::at_most, [inter](const nlohmann::json& cases, const Dtypes&, std::string& why_not) {
            return best(
                collective_row(cases, "sendrecv", inter, false, why_not),
                [](const nlohmann::json& c) { return median_time(c, "run") * 1e6; }, Bound::at_most);
          }};
}

// The best rate (GFLOP/s / 1000) of an op of the ops suite in one dtype.
Criterion op_tflops(const std::string& name, const std::string& op, const std::string& what,
                    std::string Dtypes::*dtype) {
  return {name, what, "TFLOP/s", Bound::at_least,
          [op, dtype](const nlohmann::json& cases, const Dtypes& dtypes, std::string& why_not) {
            std::vector<const nlohmann::json*> mine;
            for (const nlohmann::json* c : usable_cases(cases, "ops", op))
              if ((*c)["dtype"] == dtypes.*dtype) mine.push_back(c);
            if (mine.empty()) why_not = cat("no passing ops/", op, " case in ", dtypes.*dtype);
            return best(
                mine, [](const nlohmann::json& c) { return metric(c, "gflops") / 1e3; }, Bound::at_least);
          }};
}

// Cases of a suite at the largest rank count it ran.
std::vector<const nlohmann::json*> at_most_ranks(std::vector<const nlohmann::json*> cases) {
  int ranks = 0;
  for (const nlohmann::json* c : cases) ranks = std::max(ranks, (*c)["ranks"].get<int>());
  std::erase_if(cases, [&](const nlohmann::json* c) { return (*c)["ranks"] != ranks; });
  return cases;
}

Criterion step_mfu() {
  return {"step_mfu", "step/train MFU, best config at the largest rank count", "1", Bound::at_least,
          [](const nlohmann::json& cases, const Dtypes&, std::string& why_not) {
            const auto mine = at_most_ranks(usable_cases(cases, "step", "train"));
            if (mine.empty()) why_not = "no passing step/train case";
            return best(
                mine, [](const nlohmann::json& c) { return metric(c, "mfu"); }, Bound::at_least);
          }};
}

// The pipeline's measured bubble against the simulator fed with the same
// step's action costs: a gap means the executor waits where the schedule
// says it need not (communication, a slow rank, a scheduling bug). The
// median over the schedules and microbatch counts at the largest rank
// count, so that one step disturbed by another process does not decide.
Criterion bubble_gap() {
  return {"pipeline_bubble_gap",
          "pipeline: |measured - simulated bubble|, median over the schedules at the largest rank count", "1",
          Bound::at_most, [](const nlohmann::json& cases, const Dtypes&, std::string& why_not) {
            std::vector<double> gaps;
            for (const nlohmann::json* c : at_most_ranks(usable_cases(cases, "pipeline", ""))) {
              const double gap = std::abs(metric(*c, "bubble_measured_mean") - metric(*c, "bubble_simulated"));
              if ((*c)["parallel"].value("pp", 1) > 1 && std::isfinite(gap)) gaps.push_back(gap);
            }
            if (gaps.empty()) {
              why_not = "no passing pipeline case with 2 or more stages";
              return std::optional<Measurement>();
            }
            std::sort(gaps.begin(), gaps.end());
            const size_t n = gaps.size();
            const double median = n % 2 ? gaps[n / 2] : 0.5 * (gaps[n / 2 - 1] + gaps[n / 2]);
            return std::optional<Measurement>(Measurement{median, cat("median of ", n, " pipeline cases")});
          }};
}

Criterion conformance() {
  return {"conformance", "conformance: cases that failed their check or could not run", "cases", Bound::at_most,
          [](const nlohmann::json& cases, const Dtypes&, std::string&) -> std::optional<Measurement> {
            int bad = 0, all = 0;
            for (const nlohmann::json& c : cases) {
              if (c.contains("skipped")) continue;
              ++all;
              bad += c.contains("error") || c["conformance"].value("status", "") == "fail";
            }
            return Measurement{static_cast<double>(bad), cat(all, " cases run")};
          }};
}

}  // namespace

const std::vector<Criterion>& criteria() {
  static const std::vector<Criterion> all = [] {
    std::vector<Criterion> out = {conformance()};
    for (bool inter : {false, true}) {
      out.push_back(busbw("all_reduce", "all_reduce", inter));
      out.push_back(busbw("all_gather", "all_gather", inter));
      out.push_back(busbw("reduce_scatter", "reduce_scatter", inter));
      out.push_back(busbw("sendrecv", "p2p (sendrecv ring)", inter));
      out.push_back(p2p_latency(inter));
      out.push_back(busbw("all_to_all_v", "all_to_all_v", inter));
    }
    out.push_back(op_tflops("gemm_tflops", "gemm", "ops/gemm, best shape", &Dtypes::gemm));
    out.push_back(
        op_tflops("attention_tflops", "attention", "ops/attention forward + backward, best shape", &Dtypes::attention));
    out.push_back(step_mfu());
    out.push_back(bubble_gap());
    return out;
  }();
  return all;
}

const Criterion* find_criterion(const std::string& name) {
  for (const Criterion& c : criteria())
    if (c.name == name) return &c;
  return nullptr;
}

Verdict judge(const nlohmann::json& doc, const Expectations& e) {
  Verdict v;
  for (const Criterion& c : criteria()) {
    Outcome o;
    o.criterion = &c;
    std::string why_not;
    const std::optional<Measurement> m = c.measure(doc.at("cases"), e.dtypes, why_not);
    std::optional<Threshold> t;
    if (auto it = e.thresholds.find(c.name); it != e.thresholds.end()) t = it->second;
    else if (c.name == "conformance") t = Threshold{0, "every case must pass"};  // always judged
    if (m) o.measured = m->value, o.from = m->from;
    if (t) o.threshold = t->value, o.threshold_source = t->source;
    if (!m) {
      o.status = "NOT MEASURED";
      o.note = why_not;
    } else if (!o.threshold) {
      o.status = "NO THRESHOLD";
      o.note = cat("not in ", e.path);
    } else {
      const double have = *o.measured, want = *o.threshold;
      const bool ok = c.bound == Bound::at_least ? have >= want : have <= want;
      o.status = ok ? "PASS" : "FAIL";
      if (want != 0) o.margin_pct = 100.0 * (c.bound == Bound::at_least ? have - want : want - have) / want;
      v.pass = v.pass && ok;
    }
    v.outcomes.push_back(o);
  }
  v.suspects = suspects_of(doc.at("cases"));
  v.pass = v.pass && v.suspects.empty();
  return v;
}

namespace {
nlohmann::json optional_number(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json to_json(const Verdict& v, const Expectations& e) {
  nlohmann::json rows = nlohmann::json::array();
  int passed = 0, failed = 0, unmeasured = 0;
  for (const Outcome& o : v.outcomes) {
    passed += o.status == "PASS", failed += o.status == "FAIL";
    unmeasured += o.status != "PASS" && o.status != "FAIL";
    rows.push_back({{"criterion", o.criterion->name},
                    {"what", o.criterion->what},
                    {"unit", o.criterion->unit},
                    {"bound", o.criterion->bound == Bound::at_least ? "at least" : "at most"},
                    {"status", o.status},
                    {"measured", optional_number(o.measured)},
                    {"threshold", optional_number(o.threshold)},
                    {"margin_pct", optional_number(o.margin_pct)},
                    {"from", o.from},
                    {"threshold_source", o.threshold_source},
                    {"note", o.note}});
  }
  return {{"verdict", v.pass ? "PASS" : "FAIL"},
          {"expectations",
           {{"path", e.path},
            {"name", e.name},
            {"version", e.version},
            {"gemm_dtype", e.dtypes.gemm},
            {"attention_dtype", e.dtypes.attention}}},
          {"counts", {{"pass", passed}, {"fail", failed}, {"not_judged", unmeasured}, {"suspects", v.suspects.size()}}},
          {"criteria", rows},
          {"suspects", v.suspects}};
}

namespace {
std::string number(const nlohmann::json& v) {
  if (!v.is_number()) return "-";
  char buf[32];
  const double x = v.get<double>();
  std::snprintf(buf, sizeof buf, std::abs(x) >= 1e4 || (x != 0 && std::abs(x) < 1e-3) ? "%.3g" : "%.4g", x);
  return buf;
}
}  // namespace

std::string verdict_table(const nlohmann::json& q) {
  std::string out =
      cat("# qualify: ", q["verdict"].get<std::string>(), " against ", q["expectations"]["path"].get<std::string>(),
          " (", q["counts"]["pass"].get<int>(), " pass, ", q["counts"]["fail"].get<int>(), " fail, ",
          q["counts"]["not_judged"].get<int>(), " not judged)\n");
  char line[256];
  std::snprintf(line, sizeof line, "  %-30s %-12s %12s %12s %9s  %s\n", "criterion", "status", "measured", "threshold",
                "margin", "unit");
  out += line;
  for (const nlohmann::json& r : q["criteria"]) {
    const std::string bound = r["bound"] == "at least" ? ">= " : "<= ";
    const std::string margin = r["margin_pct"].is_number() ? cat(number(r["margin_pct"]), "%") : "-";
    std::snprintf(line, sizeof line, "  %-30s %-12s %12s %12s %9s  %s\n", r["criterion"].get<std::string>().c_str(),
                  r["status"].get<std::string>().c_str(), number(r["measured"]).c_str(),
                  r["threshold"].is_number() ? (bound + number(r["threshold"])).c_str() : "-", margin.c_str(),
                  r["unit"].get<std::string>().c_str());
    out += line;
    if (!r["note"].get<std::string>().empty()) out += cat("      ", r["note"].get<std::string>(), "\n");
  }
  const nlohmann::json suspects = q.value("suspects", nlohmann::json::array());
  out +=
      cat("# suspects: ", suspects.size(), suspects.empty() ? " (the screen named no rank, link or node)" : "", "\n");
  for (const nlohmann::json& s : suspects)
    out += cat("  ", describe_suspect(s), "\n      from ", s.value("case", ""), "\n");
  const nlohmann::json rules = q.value("suspect_rules", nlohmann::json::array());
  if (!rules.empty()) out += "# suspect rules (a member is named when its figure is worse than its class by both):\n";
  for (const nlohmann::json& r : rules)
    out += cat("  ", r["rule"].get<std::string>(), "\n      ", r["source"].get<std::string>(), "\n");
  return out;
}

}  // namespace sextant::qualify

namespace sextant::qualify {

namespace {
std::string json_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }
}  // namespace

std::string verdict_html(const nlohmann::json& doc) {
  const nlohmann::json& q = doc.at("qualification");
  const nlohmann::json& sys = doc.at("system");
  const nlohmann::json summary = sys.value("summary", nlohmann::json::object());
  const bool pass = q["verdict"] == "PASS";
  std::string out =
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>sextant qualify: " + json_text(q["verdict"]) +
      "</title><style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
      "table{border-collapse:collapse;font-size:0.9em}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}"
      "th{background:#f4f4f4}.PASS{color:#2e7d32}.FAIL{color:#c62828;font-weight:bold}.other{color:#777}"
      "td.num{text-align:right}</style></head><body>";
  out += cat("<h1>Cluster qualification: <span class=", pass ? "PASS" : "FAIL", ">", json_text(q["verdict"]),
             "</span></h1>");
  out += cat("<p>Run ", xml_escape(json_text(doc["run"]["id"])), ": ", sys["world_size"].get<int>(), " ranks on ",
             sys.value("node_count", 1), " node(s), ", sys["ranks_per_node"].get<int>(), " ranks per node; ",
             xml_escape(json_text(summary.value("accelerator", nlohmann::json("host")))), ", GPU interconnect ",
             xml_escape(json_text(summary.value("gpu_interconnect", nlohmann::json("-")))),
             ". Expectations: ", xml_escape(json_text(q["expectations"]["path"])), " (",
             xml_escape(json_text(q["expectations"]["name"])), ", version ",
             xml_escape(json_text(q["expectations"]["version"])), ").</p>");
  out +=
      "<table><tr><th>criterion</th><th>status</th><th>measured</th><th>threshold</th><th>margin</th>"
      "<th>unit</th><th>from / threshold source</th></tr>";
  for (const nlohmann::json& r : q["criteria"]) {
    const std::string status = r["status"].get<std::string>();
    const std::string cls = status == "PASS" || status == "FAIL" ? status : "other";
    const std::string bound = r["bound"] == "at least" ? "&ge; " : "&le; ";
    out +=
        cat("<tr><td title='", xml_escape(r["what"].get<std::string>()), "'>",
            xml_escape(r["criterion"].get<std::string>()), "</td><td class=", cls, ">", xml_escape(status),
            "</td><td class=num>", number(r["measured"]), "</td><td class=num>",
            r["threshold"].is_number() ? bound + number(r["threshold"]) : "-", "</td><td class=num>",
            r["margin_pct"].is_number() ? number(r["margin_pct"]) + "%" : "-", "</td><td>",
            xml_escape(r["unit"].get<std::string>()), "</td><td>", xml_escape(r["from"].get<std::string>()),
            r["note"].get<std::string>().empty() ? "" : "<br><i>" + xml_escape(r["note"].get<std::string>()) + "</i>",
            "<br><small>", xml_escape(r["threshold_source"].get<std::string>()), "</small></td></tr>");
  }
  out += "</table>";
  const nlohmann::json suspects = q.value("suspects", nlohmann::json::array());
  out += cat("<h2>Suspects: ", suspects.size(), "</h2>");
  if (suspects.empty()) out += "<p>The screen named no rank, link or node.</p>";
  else out += "<table><tr><th>suspect</th><th>case</th></tr>";
  for (const nlohmann::json& s : suspects)
    out += cat("<tr><td class=FAIL>", xml_escape(describe_suspect(s)), "</td><td>", xml_escape(s.value("case", "")),
               "</td></tr>");
  if (!suspects.empty()) out += "</table>";
  const nlohmann::json rules = q.value("suspect_rules", nlohmann::json::array());
  if (!rules.empty()) out += "<h3>Suspect rules</h3><table><tr><th>rule</th><th>source</th></tr>";
  for (const nlohmann::json& r : rules)
    out += cat("<tr><td>", xml_escape(r["rule"].get<std::string>()), "</td><td><small>",
               xml_escape(r["source"].get<std::string>()), "</small></td></tr>");
  if (!rules.empty()) out += "</table>";
  out +=
      "<p><small>Written by sextant qualify (app/qualify_criteria.cc); the full report: "
      "python3 scripts/report.py RESULTS.json -o DIR.</small></p></body></html>\n";
  return out;
}

}  // namespace sextant::qualify
