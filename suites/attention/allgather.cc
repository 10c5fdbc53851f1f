// allgather (Llama 3): every rank all-gathers K/V, attends its own queries to
// the whole sequence, and reduce-scatters dK/dV in backward.
#include "suites/attention/attention.h"

namespace sextant::attention {
namespace {

const Variant kVariant{
    "allgather",
    "all-gather K/V, local attention, reduce-scatter dK/dV (Llama 3)",
    /*ulysses=*/false,
    /*kv_group=*/true,
    cp::KvExchange::allgather,
    {"mask_off_by_one", "zigzag_order", "thd_cross_boundary", "thd_zigzag_stream", "cu_seqlens_off_by_one"}};

}  // namespace

CaseDef allgather_case() { return make_attention_case(kVariant); }
SEXTANT_REGISTER_CASE(kSuiteOrder, 30, allgather_case);

}  // namespace sextant::attention
