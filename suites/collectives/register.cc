// The collectives suite: one line per case.
#include "suites/collectives/collectives.h"

namespace sextant {

void register_collectives_suite(Registry& r) {
  using namespace collectives;
  r.add(all_reduce_case());
  r.add(all_gather_case());
  r.add(reduce_scatter_case());
  r.add(all_to_all_case());
  r.add(all_to_all_v_case());
  r.add(sendrecv_case());
  r.add(broadcast_case());
  r.add(sp_identity_case());
}

}  // namespace sextant
