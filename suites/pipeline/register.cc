// The pipeline suite: one line per case.
#include "suites/pipeline/pipeline.h"

namespace sextant {

void register_pipeline_suite(Registry& r) {
  using namespace pipeline;
  r.add(gpipe_case());
  r.add(one_f_one_b_case());
  r.add(interleaved_case());
  r.add(zb_h1_case());
  r.add(zb_v_case());
  r.add(dualpipe_v_case());
  r.add(csv_case());
}

}  // namespace sextant
