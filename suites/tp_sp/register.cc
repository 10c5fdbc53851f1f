// The tp_sp suite: one line per case.
#include "suites/tp_sp/tp_sp.h"

namespace sextant {

void register_tp_sp_suite(Registry& r) {
  using namespace tp_sp;
  r.add(mlp_case());
  r.add(attn_proj_case());
  r.add(vocab_case());
}

}  // namespace sextant
