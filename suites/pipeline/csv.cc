// csv: a user's own schedule, --set schedule_file=PATH: one row per
// pipeline rank, one action <stage><F|B|I|W><microbatch> per cell. Validated
// before anything runs (a broken rule: exit code 2 and the grid).
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {
namespace {

const ScheduleKind kKind{
    .name = "csv",
    .summary = "a user's schedule from --set schedule_file=PATH (CSV, one row per pipeline rank)",
};

}  // namespace

CaseDef csv_case() { return make_pipeline_case(kKind); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 70, csv_case);

}  // namespace sextant::pipeline
