// a2a (DeepSpeed-Ulysses): an all-to-all trades heads for sequence over the
// CP group, every rank attends its heads over the whole sequence, and the
// inverse all-to-all brings the output home. Needs cp | heads and kv heads.
#include "suites/attention/attention.h"

namespace sextant::attention {
namespace {

const Variant kVariant{"a2a",
                       "Ulysses: all-to-all heads for sequence, local attention, all-to-all back",
                       /*ulysses=*/true,
                       /*kv_group=*/false,
                       cp::KvExchange::ring,  // unused: no kv group
                       {"zigzag_order", "ulysses_swap", "thd_cross_boundary", "thd_zigzag_stream",
                        "cu_seqlens_off_by_one"}};  // one block: no block boundary to miss

}  // namespace

CaseDef a2a_case() { return make_attention_case(kVariant); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 20, a2a_case);

}  // namespace sextant::attention
