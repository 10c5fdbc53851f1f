// The live table rank 0 prints while a run progresses.
#pragma once

#include <string>

#include "harness/results.h"
#include "harness/runner.h"

namespace sextant {

// Header line for a case (printed when the case changes).
std::string table_header(const CaseDef& def);
// One row: progress, config, time, the case's table metrics, conformance.
std::string table_row(const CaseDef& def, const CaseRecord& record, size_t index, size_t total);
// Closing summary: counts of pass / fail / skip / error.
std::string table_summary(const std::vector<CaseRecord>& records);

}  // namespace sextant
