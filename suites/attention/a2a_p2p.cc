// a2a+p2p (hierarchical, as TE's "a2a+p2p"): Ulysses inside groups of
// a2a_size consecutive CP ranks, then a ring over the cp / a2a_size groups.
// cp = a2a_size x p2p_size.
#include "suites/attention/attention.h"

namespace sextant::attention {
namespace {

const Variant kVariant{"a2a+p2p",
                       "hierarchical: Ulysses inside a2a_size groups, a ring over the p2p_size groups",
                       /*ulysses=*/true,
                       /*kv_group=*/true,
                       cp::KvExchange::ring,
                       {"ring_skip_step", "lse_add", "mask_off_by_one", "zigzag_order", "dkv_not_returned",
                        "ulysses_swap", "thd_cross_boundary", "thd_zigzag_stream", "cu_seqlens_off_by_one"}};

}  // namespace

CaseDef a2a_p2p_case() { return make_attention_case(kVariant); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 40, a2a_p2p_case);

}  // namespace sextant::attention
