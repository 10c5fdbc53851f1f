// The attention suite: one line per case.
#include "suites/attention/attention.h"

namespace sextant {

void register_attention_suite(Registry& r) {
  using namespace attention;
  r.add(p2p_case());
  r.add(a2a_case());
  r.add(allgather_case());
  r.add(a2a_p2p_case());
  r.add(dynamic_cp_case());
}

}  // namespace sextant
