#include "kernels/pipeline/timeline.h"

#include <algorithm>
#include <map>
#include <utility>

namespace sextant::pp {

TimelineStats summarize(const Timeline& timeline) {
  TimelineStats s;
  for (const auto& rank : timeline.ranks)
    for (const TimedAction& a : rank) s.makespan = std::max(s.makespan, a.end);
  for (const auto& rank : timeline.ranks) {
    double busy = 0;
    for (const TimedAction& a : rank) busy += a.end - a.start;
    const double idle = std::max(0.0, s.makespan - busy);
    s.busy.push_back(busy);
    s.idle.push_back(idle);
    s.bubble.push_back(s.makespan > 0 ? idle / s.makespan : 0.0);
  }
  if (!s.bubble.empty()) {
    double sum = 0;
    for (double b : s.bubble) sum += b;
    s.bubble_mean = sum / static_cast<double>(s.bubble.size());
    s.bubble_max = *std::max_element(s.bubble.begin(), s.bubble.end());
  }
  return s;
}

std::vector<double> peak_activations(const Schedule& schedule) {
  std::vector<double> peaks;
  for (int r = 0; r < static_cast<int>(schedule.actions.size()); ++r) {
    const double chunks = std::max<size_t>(1, schedule.stages_of(r).size());
    int held = 0, peak = 0;
    for (const Action& a : schedule.actions[r]) {
      if (a.type == ActionType::F) peak = std::max(peak, ++held);
      if (a.type == ActionType::B || a.type == ActionType::W) --held;
    }
    peaks.push_back(peak / chunks);
  }
  return peaks;
}

nlohmann::json timeline_json(const Timeline& timeline) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& rank : timeline.ranks) {
    nlohmann::json list = nlohmann::json::array();
    for (const TimedAction& a : rank)
      list.push_back({a.action.stage, std::string(1, type_letter(a.action.type)), a.action.microbatch, a.start, a.end});
    ranks.push_back(std::move(list));
  }
  return ranks;
}

nlohmann::json chrome_trace(const Timeline& timeline, const std::string& process_name) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", process_name}}}});
  for (int r = 0; r < static_cast<int>(timeline.ranks.size()); ++r) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    for (const TimedAction& a : timeline.ranks[r])
      events.push_back({{"name", to_string(a.action)},
                        {"cat", std::string(1, type_letter(a.action.type))},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", r},
                        {"ts", a.start * 1e6},
                        {"dur", (a.end - a.start) * 1e6},
                        {"args", {{"stage", a.action.stage}, {"microbatch", a.action.microbatch}}}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace sextant::pp
