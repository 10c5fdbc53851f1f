#include "harness/stall_report.h"

#include <algorithm>

#include "harness/strings.h"

namespace sextant {

std::string describe_call(const RankPosition& p) {
  if (p.in_call) return "in " + p.call;
  if (!p.call.empty()) return "after " + p.call;
  return "before any communicator call";
}

namespace {

std::string state_text(char state) {
  switch (state) {
    case 'T':
    case 't': return "stopped: SIGSTOP or a debugger";
    case 'Z':
    case 'X':
    case '?': return "gone: exited or killed";
    default: return "";
  }
}

std::string where(const RankPosition& p) {
  if (!p.armed) return cat("between cases, ", describe_call(p));
  return cat("case ", p.case_index, ", phase ", p.phase, ", ", describe_call(p));
}

}  // namespace

StallReport analyze_stall(const std::vector<RankPosition>& before, const std::vector<RankPosition>& after,
                          const std::vector<char>& states) {
  StallReport report;
  const size_t n = after.size();
  int latest_case = 0;
  bool someone_waits = false;
  for (size_t i = 0; i < n; ++i) {
    if (!after[i].armed || after[i].pid == 0) continue;
    latest_case = std::max(latest_case, after[i].case_index);
    someone_waits |= after[i].in_call;
  }
  std::vector<std::string> reasons;
  int progressing = 0, involved = 0;
  for (size_t i = 0; i < n; ++i) {
    const RankPosition& p = after[i];
    if (p.pid == 0) continue;  // a slot nobody has taken (yet)
    const bool moved = p.sequence != before[i].sequence;
    const std::string state = state_text(states[i]);
    std::string why = state;
    if (why.empty() && p.armed && !moved) {
      if (p.case_index < latest_case) why = cat("behind: others are in case ", latest_case);
      else if (!p.in_call && someone_waits) why = "no progress outside any communicator call while others wait in one";
    }
    if (p.armed || !state.empty()) {
      ++involved;
      progressing += moved;
    }
    std::string line =
        cat("rank ", p.world_rank, " (pid ", p.pid, "): ", where(p), "; ", moved ? "progressing" : "no progress");
    if (!why.empty()) {
      line += "; STUCK: " + why;
      report.stuck.push_back(p.world_rank);
      reasons.push_back(cat("rank ", p.world_rank, ": ", where(p), " (", why, ")"));
    }
    report.ranks.push_back(line);
  }
  if (!reasons.empty()) report.summary = "stuck: " + join(reasons, "; ");
  else if (involved > 0 && progressing == involved)
    report.summary = "no rank is stuck: every rank still progresses (the case is slow; raise --timeout)";
  else
    report.summary =
        "no rank stands out: every rank waits inside a communicator call "
        "(mismatched calls, or a hang in the communicator or the network)";
  return report;
}

}  // namespace sextant
