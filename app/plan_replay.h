// `sextant plan --replay RESULTS.json`: the host step/sweep cases of a
// stored run predicted again by this build's calibrated planner, from the
// calibration and contention the run recorded, beside the measured step
// and the prediction the run made. A change to the planner is then judged
// on the same measurements, not on a new run's noise.
#pragma once

#include <string>

namespace sextant {

// Prints the replay of every host step/sweep case in the results file;
// throws UsageError for a file that is not a results file or holds none.
void print_sweep_replay(const std::string& path);

}  // namespace sextant
