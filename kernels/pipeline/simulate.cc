#include "kernels/pipeline/simulate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/strings.h"
#include "kernels/pipeline/validate.h"

namespace sextant::pp {

CostModel CostModel::uniform(int stages, double f, double i, double w, double latency) {
  const size_t n = static_cast<size_t>(stages);
  return {std::vector<double>(n, f), std::vector<double>(n, i + w), std::vector<double>(n, i),
          std::vector<double>(n, w), latency};
}

double CostModel::cost(const Action& a) const {
  const size_t s = static_cast<size_t>(a.stage);
  const std::vector<double>& table = a.type == ActionType::F   ? f
                                     : a.type == ActionType::B ? b
                                     : a.type == ActionType::I ? i
                                                               : w;
  if (s >= table.size()) throw RuntimeError(cat("cost model has no cost for ", to_string(a)));
  return table[s];
}

CostModel measured_costs(const Schedule& schedule, const Timeline& measured, double latency) {
  const size_t n = static_cast<size_t>(schedule.stages);
  std::vector<std::vector<double>> sum(4, std::vector<double>(n, 0.0)), count = sum;
  for (const auto& rank : measured.ranks)
    for (const TimedAction& a : rank) {
      const size_t t = static_cast<size_t>(a.action.type), s = static_cast<size_t>(a.action.stage);
      sum[t][s] += a.end - a.start;
      count[t][s] += 1;
    }
  auto mean = [&](ActionType type, size_t s) {
    const size_t t = static_cast<size_t>(type);
    return count[t][s] > 0 ? sum[t][s] / count[t][s] : std::numeric_limits<double>::quiet_NaN();
  };
  CostModel c;
  c.latency = latency;
  for (size_t s = 0; s < n; ++s) {
    double f = mean(ActionType::F, s), b = mean(ActionType::B, s), i = mean(ActionType::I, s),
           w = mean(ActionType::W, s);
    if (std::isnan(b)) b = i + w;
    if (std::isnan(i)) i = b / 2;
    if (std::isnan(w)) w = b / 2;
    c.f.push_back(f), c.b.push_back(b), c.i.push_back(i), c.w.push_back(w);
  }
  return c;
}

namespace {

// Places every action: it starts when its rank is free and everything it
// depends on has finished (plus `latency` when that ran on another rank).
// cost(rank, step) is the action's duration.
template <class Cost>
Simulation run_simulation(const Schedule& schedule, double latency, Cost cost) {
  validate(schedule);
  const ScheduleIndex index(schedule);
  const int p = schedule.ranks;
  std::vector<std::vector<double>> end(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) end[r].assign(schedule.actions[r].size(), -1.0);
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<double> free_at(static_cast<size_t>(p), 0.0);
  Simulation sim;
  sim.timeline.ranks.resize(static_cast<size_t>(p));

  // Earliest start of `a` on rank r, or -1 while a dependency has not run.
  auto earliest = [&](int r, const Action& a) {
    double t = free_at[r];
    for (const auto& [dep, where] : index.dependencies(a)) {
      const double done = end[where.rank][where.step];
      if (done < 0) return -1.0;
      t = std::max(t, done + (where.rank != r ? latency : 0.0));
    }
    return t;
  };
  // The schedule is deadlock-free (validated), so sweeping the ranks until
  // every list is done places every action; each start depends only on the
  // rank's previous action and the action's dependencies.
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r)
      while (next[r] < schedule.actions[r].size()) {
        const Action& a = schedule.actions[r][next[r]];
        const double start = earliest(r, a);
        if (start < 0) break;
        const double stop = start + cost(r, next[r], a);
        end[r][next[r]++] = stop;
        free_at[r] = stop;
        sim.timeline.ranks[r].push_back({a, start, stop});
        progress = true;
      }
  }
  sim.stats = summarize(sim.timeline);
  sim.peak_activations = peak_activations(schedule);
  return sim;
}

}  // namespace

Simulation simulate(const Schedule& schedule, const CostModel& costs) {
  return run_simulation(schedule, costs.latency, [&](int, size_t, const Action& a) { return costs.cost(a); });
}

Simulation replay(const Schedule& schedule, const Timeline& measured, double latency) {
  bool same = measured.ranks.size() == schedule.actions.size();
  for (size_t r = 0; same && r < measured.ranks.size(); ++r) {
    same = measured.ranks[r].size() == schedule.actions[r].size();
    for (size_t t = 0; same && t < measured.ranks[r].size(); ++t)
      same = measured.ranks[r][t].action == schedule.actions[r][t];
  }
  if (!same) throw RuntimeError(cat("replay: the timeline does not follow schedule ", schedule.name));
  return run_simulation(schedule, latency, [&](int r, size_t t, const Action&) {
    const TimedAction& a = measured.ranks[r][t];
    return a.end - a.start;
  });
}

}  // namespace sextant::pp
