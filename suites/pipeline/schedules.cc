// The suite's generated-schedule cases: one per row of
// kernels/pipeline/schedules.h, in the table's order (csv.cc adds the user's
// own schedule after them).
#include <deque>

#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {

std::vector<CaseDef> schedule_cases() {
  static const std::deque<ScheduleKind> kinds = [] {  // stable addresses: the cases keep pointers
    std::deque<ScheduleKind> out;
    for (const pp::ScheduleInfo& info : pp::schedules()) out.push_back({info.name, info.summary, &info});
    return out;
  }();
  std::vector<CaseDef> out;
  for (const ScheduleKind& kind : kinds) out.push_back(make_pipeline_case(kind));
  return out;
}
SEXTANT_REGISTER_CASES(kSuiteOrder, 10, schedule_cases);

}  // namespace sextant::pipeline
