// 1f1b: PipeDream-Flush (Narayanan et al. 2021). Rank r runs p - r - 1
// warm-up forwards, then alternates forward and backward: GPipe's bubble at
// p - r activations instead of m.
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {
namespace {

const ScheduleKind kKind{
    .name = "1f1b",
    .summary = "1F1B: p - r - 1 warm-up forwards, then one forward one backward (peak p - r)",
    .chunks = {1},
    .chunk_rule = "one stage per rank",
};

}  // namespace

CaseDef one_f_one_b_case() { return make_pipeline_case(kKind); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 20, one_f_one_b_case);

}  // namespace sextant::pipeline
