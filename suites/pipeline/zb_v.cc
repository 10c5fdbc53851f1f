// zb-v: two chunks per rank in a V (rank 0 holds the first and the last
// stage), the I / W split, zero bubble at 1F1B's activation memory.
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {
namespace {

const ScheduleKind kKind{
    .name = "zb-v",
    .summary = "ZB-V: two chunks per rank in a V, I/W split, zero bubble at 1F1B memory",
    .chunks = {2},
    .chunk_rule = "two chunks per rank in a V",
    .needs_full_pipeline = true,
};

}  // namespace

CaseDef zb_v_case() { return make_pipeline_case(kKind); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 50, zb_v_case);

}  // namespace sextant::pipeline
