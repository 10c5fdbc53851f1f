// `sextant plan --reference`: five well-known 6D training configurations
// (kernels/planner/planner.h reference_runs) with the MFU reported for each,
// the planner's estimate (H100/A100/H800 peaks, or a stored calibration),
// the gap, and where the planner's step goes, so the gap can be explained.
#pragma once

#include "kernels/planner/calibration.h"

namespace sextant {

// Prints the table; cal: the calibration to estimate with as well (or null).
void print_reference_table(const plan::Calibration* cal);

}  // namespace sextant
