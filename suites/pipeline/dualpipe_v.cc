// dualpipe-v: DeepSeek's DualPipe cut to one V (torch's ScheduleDualPipeV):
// ZB-V's placement, a main phase of F0 B1 / F1 B0 pairs, m >= 2p.
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {
namespace {

const ScheduleKind kKind{
    .name = "dualpipe-v",
    .summary = "DualPipeV: the V of ZB-V with DualPipe's F0 B1 / F1 B0 main phase (m >= 2p)",
    .chunks = {2},
    .chunk_rule = "two chunks per rank in a V",
    .min_microbatches_per_stage = 2,
};

}  // namespace

CaseDef dualpipe_v_case() { return make_pipeline_case(kKind); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 60, dualpipe_v_case);

}  // namespace sextant::pipeline
