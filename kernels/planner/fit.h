// Fitting the time model's free parameters (ClusterSpec::gemm_efficiency
// and layer_overhead_us) to published runs, and the leave-one-out check
// that the model is not tuned to the table: fit on every row but one,
// predict that one.
#pragma once

#include <vector>

#include "kernels/planner/corpus.h"

namespace sextant::plan {

struct FreeParameters {
  double gemm_efficiency = 0, layer_overhead_us = 0;
};

// The planner's MFU for a published run, with these parameters.
double predicted_mfu(const PublishedRun& run, const FreeParameters& p);

// The parameters that minimise the sum of squared MFU gaps over `runs`,
// leaving out the row `leave_out` (-1: none) and the illustrative rows. Searched on a grid that is
// refined around its best point: gemm efficiency 0.4-1, overhead 0-1000 us.
FreeParameters fit(const std::vector<PublishedRun>& runs, int leave_out = -1);

struct FitReport {
  FreeParameters all;                // fitted on every row
  std::vector<double> gap;           // predicted - reported MFU, each row, parameters fitted on all rows
  std::vector<double> held_out_gap;  // the same, parameters fitted without that row
  // |gap| over the measured rows (illustrative ones left out).
  double median_gap = 0, max_gap = 0, median_held_out_gap = 0, max_held_out_gap = 0;
};
FitReport fit_report(const std::vector<PublishedRun>& runs);

double median_abs(std::vector<double> v);

}  // namespace sextant::plan
