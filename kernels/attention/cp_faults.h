// The planted faults of context-parallel attention (docs/CONFORMANCE.md: a
// check is only as good as the faults it catches), each a bug a real
// implementation could have, as one table (harness/fault_table.h). The
// kernels read CpOptions::fault; the attention suite and dynamic CP plant
// the faults that show in their configs.
#pragma once

#include <cstddef>
#include <optional>

#include "harness/fault_table.h"
#include "kernels/attention/cp_types.h"
#include "kernels/attention/layout.h"

namespace sextant::cp {

enum class Fault {
  none,
  ring_skip_step,         // the ring stops one block short
  lse_add,                // partial LSEs merged by adding, not log-sum-exp
  mask_off_by_one,        // blocks from other members sit one position early in the causal mask
  zigzag_order,           // the kernel places a rank's two zigzag chunks in swapped order
  dkv_not_returned,       // the dK/dV accumulators skip their last hop and stay on the rank before their owner
  ulysses_swap,           // the all-to-all reads its blocks with the heads and sequence dims swapped
  thd_cross_boundary,     // packed: the mask forgets the sequences (one causal stream)
  thd_zigzag_stream,      // packed: the stream zigzagged as one sequence, not each sequence on its own
  cu_seqlens_off_by_one,  // packed: every boundary between sequences sits one row late in the mask
};

// What a config of CP attention looks like to its faults.
struct FaultSite {
  bool a2a = false;              // a Ulysses stage
  std::optional<KvExchange> kv;  // the KV exchange over a kv group (none: no kv group)
  int kv_size = 2;               // members of the kv group
  bool causal = false;
  Layout layout = Layout::contiguous;
  size_t sequences = 0;  // packed sequences in a batch row (0: not packed)
};

const FaultTable<Fault, FaultSite>& faults();

}  // namespace sextant::cp
