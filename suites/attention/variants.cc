// The suite's CP variant cases: one per row of kernels/attention/cp_variants.h,
// in the table's order (p2p, a2a, allgather, a2a+p2p).
#include "suites/attention/attention.h"

namespace sextant::attention {

std::vector<CaseDef> variant_cases() {
  std::vector<CaseDef> out;
  for (const cp::VariantInfo& v : cp::variants()) out.push_back(make_attention_case(v));
  return out;
}
SEXTANT_REGISTER_CASES(kSuiteOrder, 10, variant_cases);

}  // namespace sextant::attention
