// gpipe: every microbatch's forward, then every backward (Huang et al. 2019).
// Bubble (p-1)/(m+p-1) of the step; every rank holds all m microbatches.
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {
namespace {

const ScheduleKind kKind{
    .name = "gpipe",
    .summary = "every forward, then every backward (peak activations m per rank)",
    .chunks = {1},
    .chunk_rule = "one stage per rank",
};

}  // namespace

CaseDef gpipe_case() { return make_pipeline_case(kKind); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 10, gpipe_case);

}  // namespace sextant::pipeline
