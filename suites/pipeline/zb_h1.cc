// zb-h1: zero bubble (Qi et al. 2024) in 1F1B's memory: every backward is
// split into I (input gradient) and W (weight gradient), and W is delayed to
// fill the drain. Bubble (p-1)(F+I-W), a third of 1F1B's at equal costs.
#include "suites/pipeline/pipeline.h"

namespace sextant::pipeline {
namespace {

const ScheduleKind kKind{
    .name = "zb-h1",
    .summary = "ZB-H1: 1F1B with the backward split into I and W, W delayed to fill the drain",
    .chunks = {1},
    .chunk_rule = "one stage per rank",
    .needs_full_pipeline = true,
};

}  // namespace

CaseDef zb_h1_case() { return make_pipeline_case(kKind); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 40, zb_h1_case);

}  // namespace sextant::pipeline
