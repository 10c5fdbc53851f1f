#include "app/plan_replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "harness/error.h"
#include "harness/results.h"
#include "harness/strings.h"
#include "harness/timing.h"
#include "suites/step/step.h"

namespace sextant {

namespace {

double median(std::vector<double> v) { return v.empty() ? NAN : percentile_of(std::move(v), 0.5); }

double error_pct(double predicted, double measured) {
  return std::isfinite(predicted) && measured > 0 ? 100 * (predicted - measured) / measured : NAN;
}

}  // namespace

void print_sweep_replay(const std::string& path) {
  const nlohmann::json doc = read_results_file(path, "--replay");
  const nlohmann::json& system = doc.at("system");
  // The planner sees one node: the sweep's configs on several nodes replay
  // with a different placement than they ran with.
  require(system.value("node_count", 1) == 1,
          cat("--replay '", path, "': a run on ", system.value("node_count", 1), " nodes; replay reads one-node runs"));
  const int cores = system.value("cores", 1), threads = system.value("blas_threads", 1);
  std::string out;  // printed once every case has replayed
  int replayed = 0;
  for (const nlohmann::json& c : doc.at("cases")) {
    if (c.value("suite", "") != "step" || c.value("case", "") != "sweep" || c.value("device", "") != "host") continue;
    if (!c.contains("perf") || !c["perf"].contains("metrics") || !c["perf"]["metrics"].contains("ranking")) continue;
    const int ranks = c.at("ranks").get<int>();
    const std::vector<step::ReplayedConfig> rows =
        step::replay_sweep(c.at("params"), ranks, c["perf"]["metrics"], cores, threads);
    std::vector<double> recorded, now;
    for (const step::ReplayedConfig& r : rows) {
      if (const double e = error_pct(r.recorded_s, r.measured_s); std::isfinite(e)) recorded.push_back(std::abs(e));
      if (const double e = error_pct(r.replayed_s, r.measured_s); std::isfinite(e)) now.push_back(std::abs(e));
    }
    char line[240];
    std::snprintf(line, sizeof line, "step/sweep at %d ranks (%s): median |error| recorded %.1f%%, replayed %.1f%%\n",
                  ranks, doc["run"].value("git_sha", std::string("unknown build")).c_str(), median(recorded),
                  median(now));
    out += line;
    std::snprintf(line, sizeof line, "  %-28s %10s %10s %7s %10s %7s\n", "config", "measured", "recorded", "error",
                  "replayed", "error");
    out += line;
    for (const step::ReplayedConfig& r : rows) {
      std::snprintf(line, sizeof line, "  %-28s %8.2fms %8.2fms %+6.1f%% %8.2fms %+6.1f%%\n", r.config.c_str(),
                    r.measured_s * 1e3, r.recorded_s * 1e3, error_pct(r.recorded_s, r.measured_s), r.replayed_s * 1e3,
                    error_pct(r.replayed_s, r.measured_s));
      out += line;
    }
    ++replayed;
  }
  require(replayed > 0, cat("--replay '", path, "' holds no host step/sweep case"));
  std::fputs(out.c_str(), stdout);
}

}  // namespace sextant
