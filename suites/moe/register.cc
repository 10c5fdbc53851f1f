// The moe suite: one line per case.
#include "suites/moe/moe.h"

namespace sextant {

void register_moe_suite(Registry& r) { r.add(moe_suite::layer_case()); }

}  // namespace sextant
