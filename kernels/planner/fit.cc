#include "kernels/planner/fit.h"

#include <algorithm>
#include <cmath>

namespace sextant::plan {

double predicted_mfu(const PublishedRun& run, const FreeParameters& p) {
  ClusterSpec c = run_cluster(run);
  c.gemm_efficiency = p.gemm_efficiency, c.layer_overhead_us = p.layer_overhead_us;
  return estimate(run.model, c, run.train, run.config).mfu;
}

namespace {

double squared_gaps(const std::vector<PublishedRun>& runs, int leave_out, const FreeParameters& p) {
  double sum = 0;
  for (size_t i = 0; i < runs.size(); ++i)
    if (static_cast<int>(i) != leave_out && !runs[i].illustrative)
      sum += std::pow(predicted_mfu(runs[i], p) - runs[i].reported_mfu, 2);
  return sum;
}

}  // namespace

FreeParameters fit(const std::vector<PublishedRun>& runs, int leave_out) {
  // A 13 x 13 grid over the whole range, then again over the four steps
  // around its best point, each round a third as wide (the two parameters
  // trade against each other along a valley, so the grid shrinks slowly).
  constexpr double kLeastEfficiency = 0.4, kMostEfficiency = 1.0, kMostOverheadUs = 3000;
  constexpr int kPoints = 13, kRounds = 9;
  double lo_e = kLeastEfficiency, hi_e = kMostEfficiency, lo_o = 0, hi_o = kMostOverheadUs;
  FreeParameters best{};
  double best_cost = INFINITY;
  for (int round = 0; round < kRounds; ++round) {
    const double step_e = (hi_e - lo_e) / (kPoints - 1), step_o = (hi_o - lo_o) / (kPoints - 1);
    for (int i = 0; i < kPoints; ++i)
      for (int j = 0; j < kPoints; ++j) {
        const FreeParameters p{lo_e + step_e * i, lo_o + step_o * j};
        const double cost = squared_gaps(runs, leave_out, p);
        if (cost < best_cost) best_cost = cost, best = p;
      }
    lo_e = std::max(kLeastEfficiency, best.gemm_efficiency - 2 * step_e);
    hi_e = std::min(kMostEfficiency, best.gemm_efficiency + 2 * step_e);
    lo_o = std::max(0.0, best.layer_overhead_us - 2 * step_o);
    hi_o = std::min(kMostOverheadUs, best.layer_overhead_us + 2 * step_o);
  }
  return best;
}

FitReport fit_report(const std::vector<PublishedRun>& runs) {
  FitReport r;
  r.all = fit(runs);
  for (size_t i = 0; i < runs.size(); ++i) {
    r.gap.push_back(predicted_mfu(runs[i], r.all) - runs[i].reported_mfu);
    // An illustrative row is never fitted on: the fit on all rows is its held-out fit.
    const FreeParameters held_out = runs[i].illustrative ? r.all : fit(runs, static_cast<int>(i));
    r.held_out_gap.push_back(predicted_mfu(runs[i], held_out) - runs[i].reported_mfu);
  }
  std::vector<double> measured, measured_held_out;
  for (size_t i = 0; i < runs.size(); ++i)
    if (!runs[i].illustrative) {
      measured.push_back(r.gap[i]), measured_held_out.push_back(r.held_out_gap[i]);
      r.max_gap = std::max(r.max_gap, std::abs(r.gap[i]));
      r.max_held_out_gap = std::max(r.max_held_out_gap, std::abs(r.held_out_gap[i]));
    }
  r.median_gap = median_abs(measured), r.median_held_out_gap = median_abs(measured_held_out);
  return r;
}

double median_abs(std::vector<double> v) {
  if (v.empty()) return 0;
  for (double& x : v) x = std::abs(x);
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace sextant::plan
