// The step suite: one line per case.
#include "suites/step/step.h"

namespace sextant {

void register_step_suite(Registry& r) {
  r.add(step::train_case());
  r.add(step::sweep_case());
}

}  // namespace sextant
