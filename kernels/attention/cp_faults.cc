#include "kernels/attention/cp_faults.h"

namespace sextant::cp {

namespace {

bool ring(const FaultSite& s) { return s.kv == KvExchange::ring && s.kv_size >= 2; }
bool kv_blocks(const FaultSite& s) { return s.kv.has_value() && s.kv_size >= 2 && s.causal; }
bool zigzag(const FaultSite& s) { return s.causal && s.layout == Layout::zigzag; }
bool ulysses(const FaultSite& s) { return s.a2a; }
bool packed(const FaultSite& s) { return s.sequences >= 2; }
bool packed_zigzag(const FaultSite& s) { return packed(s) && s.layout == Layout::zigzag; }

}  // namespace

const FaultTable<Fault, FaultSite>& faults() {
  static const FaultTable<Fault, FaultSite> table(
      "attention",
      {
          {Fault::ring_skip_step, "ring_skip_step", "the ring stops one K/V block short", "a ring of 2+ members", ring},
          {Fault::lse_add, "lse_add", "partial results merged by adding their LSEs, not by log-sum-exp",
           "a ring of 2+ members", ring},
          {Fault::mask_off_by_one, "mask_off_by_one",
           "the causal mask is off by one at block boundaries: the row before another member's block sees its "
           "first key",
           "a causal mask over a kv group of 2+ (ring or all-gather)", kv_blocks},
          {Fault::zigzag_order, "zigzag_order", "the kernel places a rank's two zigzag chunks in swapped order",
           "causal, zigzag layout", zigzag},
          {Fault::dkv_not_returned, "dkv_not_returned",
           "the dK/dV accumulators skip their last hop and stay on the rank before their owner", "a ring of 2+ members",
           ring},
          {Fault::ulysses_swap, "ulysses_swap", "the all-to-all reads its blocks with heads and sequence swapped",
           "a Ulysses (a2a) stage", ulysses},
          {Fault::thd_cross_boundary, "thd_cross_boundary",
           "the mask forgets the packed sequences: rows attend into earlier sequences", "2+ packed sequences", packed},
          {Fault::thd_zigzag_stream, "thd_zigzag_stream",
           "the packed stream is zigzagged as one sequence, not each sequence on its own",
           "2+ packed sequences, zigzag layout", packed_zigzag},
          {Fault::cu_seqlens_off_by_one, "cu_seqlens_off_by_one",
           "every boundary between packed sequences sits one row late in the mask", "2+ packed sequences", packed},
      });
  return table;
}

}  // namespace sextant::cp
