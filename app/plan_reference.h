// `sextant plan --reference`: the published training runs of
// kernels/planner/corpus.h with the MFU reported for each, the planner's
// estimate with its free parameters fitted on all rows and on all rows but
// that one (kernels/planner/fit.h), the gaps, and where the planner's step
// goes, so each gap can be explained.
#pragma once

#include "kernels/planner/calibration.h"

namespace sextant {

// Prints the table; cal: the calibration to estimate with as well (or null).
void print_reference_table(const plan::Calibration* cal);

}  // namespace sextant
