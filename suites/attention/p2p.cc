// p2p: ring attention over the CP group. K/V blocks travel the ring by
// isend/irecv while the current block is computed; in backward the dK/dV
// accumulators travel with their blocks and are home after a full turn.
#include "suites/attention/attention.h"

namespace sextant::attention {
namespace {

const Variant kVariant{"p2p",
                       "ring attention: K/V around the CP ring (isend/irecv under compute), dK/dV travel home",
                       /*ulysses=*/false,
                       /*kv_group=*/true,
                       cp::KvExchange::ring,
                       {"ring_skip_step", "lse_add", "mask_off_by_one", "zigzag_order", "dkv_not_returned",
                        "thd_cross_boundary", "thd_zigzag_stream", "cu_seqlens_off_by_one"}};

}  // namespace

CaseDef p2p_case() { return make_attention_case(kVariant); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 10, p2p_case);

}  // namespace sextant::attention
