// Resuming a run that did not finish: the same plan, run again without the
// case instances that already finished (told apart by case id), then one
// results document holding the old and the new records in plan order.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/journal.h"
#include "harness/runner.h"

namespace sextant {

// What a run must share with the run it resumes: the world size, the options
// that change what runs or what it measures, and the plan (count and a hash
// of its case ids). Written as run.plan in results files and journals.
nlohmann::json describe_plan(const RunOptions& options, const std::vector<PlannedCase>& plan, int world_size,
                             const std::string& backend);

// Throws UsageError, one line naming `option`, the file and the first
// difference, unless `snapshot` was planned like `plan`.
void require_same_plan(const RunSnapshot& snapshot, const nlohmann::json& plan, const std::string& option,
                       const std::string& path);

// The planned cases whose ids are not among snapshot.cases.
std::vector<PlannedCase> missing_cases(const std::vector<PlannedCase>& plan, const RunSnapshot& snapshot);

// Every record of `old_cases` and `new_cases`, ordered as `plan` (by id).
nlohmann::json in_plan_order(const std::vector<PlannedCase>& plan, const nlohmann::json& old_cases,
                             const nlohmann::json& new_cases);

}  // namespace sextant
