// interleaved: Megatron's interleaved 1F1B, v chunks per rank round-robin
// (stage s on rank s % p); the bubble time divided by v, m % p == 0. v = 1 is 1F1B.
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {
namespace {

const ScheduleKind kKind{
    .name = "interleaved",
    .summary = "interleaved 1F1B (Megatron): v chunks per rank round-robin, bubble divided by v",
    .chunks = {1, 2},
    .needs_full_pipeline = true,
};

}  // namespace

CaseDef interleaved_case() { return make_pipeline_case(kKind); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 30, interleaved_case);

}  // namespace sextant::pipeline
