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
#include "kernels/ops/attention_mask.h"

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
  dkv_scale,              // the ring's dK/dV come home scaled by 1 + magnitude (a systematic error, default 1e-3)
  window_skip_partial,    // windowed: the ring skips every step whose block the window only partly covers
  kv_replica_first_only,  // Ulysses with replicated KV heads: dK/dV of a head is its first copy's, not the sum
  padding_rows_attend,    // packed: the mask names padding rows as rows of their sequence (they attend and are seen)
};

// What a config of CP attention looks like to its faults.
struct FaultSite {
  bool a2a = false;              // a Ulysses stage
  std::optional<KvExchange> kv;  // the KV exchange over a kv group (none: no kv group)
  int kv_size = 2;               // members of the kv group
  bool causal = false;
  Layout layout = Layout::contiguous;
  size_t sequences = 0;        // packed sequences in a batch row (0: not packed)
  ops::Window window;          // sliding window (attention_mask.h; none by default)
  bool kv_replicated = false;  // the Ulysses stage sends each KV head as several copies
};

namespace rules {

inline bool ring(const FaultSite& s) { return s.kv == KvExchange::ring && s.kv_size >= 2; }
// The ring's last step brings a rank the block of the member after it: in a
// causal contiguous layout only the last member's (rank 0's block) carries
// work, and none does when the stream packs 2+ sequences (the first and the
// last member hold different sequences) or, from three members on, when a
// sliding window ends before rank 0's block (as the sweep's seq/8 does) and
// sees no key after the query (causal, or right 0); a window that does sees
// the start of the next member's block.
inline bool ring_last_step_has_work(const FaultSite& s) {
  const bool contiguous = s.layout == Layout::contiguous;
  const bool window_hides = s.window.any() && (s.causal || s.window.right == 0) && contiguous && s.kv_size >= 3;
  return ring(s) && !(s.sequences >= 2 && contiguous) && !window_hides;
}
inline bool kv_blocks(const FaultSite& s) { return s.kv.has_value() && s.kv_size >= 2 && s.causal; }
inline bool zigzag(const FaultSite& s) { return s.causal && s.layout == Layout::zigzag; }
inline bool ulysses(const FaultSite& s) { return s.a2a; }
inline bool packed(const FaultSite& s) { return s.sequences >= 2; }
inline bool packed_zigzag(const FaultSite& s) { return packed(s) && s.layout == Layout::zigzag; }
// Every windowed ring has a partly covered step: the diagonal (its own block).
inline bool windowed_ring(const FaultSite& s) { return ring(s) && s.window.any(); }
inline bool kv_replicated(const FaultSite& s) { return s.a2a && s.kv_replicated; }
inline bool packed_any(const FaultSite& s) { return s.sequences >= 1; }

}  // namespace rules

inline const FaultTable<Fault, FaultSite>& faults() {
  static const FaultTable<Fault, FaultSite> table(
      "attention",
      {
          {Fault::ring_skip_step, "ring_skip_step", "the ring stops one K/V block short",
           "a ring of 2+ members, unless it packs 2+ sequences or (3+ members) holds a sliding window in contiguous "
           "layout",
           rules::ring_last_step_has_work},
          {Fault::lse_add, "lse_add", "partial results merged by adding their LSEs, not by log-sum-exp",
           "a ring of 2+ members", rules::ring},
          {Fault::mask_off_by_one, "mask_off_by_one",
           "the causal mask is off by one at block boundaries: the row before another member's block sees its "
           "first key",
           "a causal mask over a kv group of 2+ (ring or all-gather)", rules::kv_blocks},
          {Fault::zigzag_order, "zigzag_order", "the kernel places a rank's two zigzag chunks in swapped order",
           "causal, zigzag layout", rules::zigzag},
          {Fault::dkv_not_returned, "dkv_not_returned",
           "the dK/dV accumulators skip their last hop and stay on the rank before their owner", "a ring of 2+ members",
           rules::ring},
          {Fault::ulysses_swap, "ulysses_swap", "the all-to-all reads its blocks with heads and sequence swapped",
           "a Ulysses (a2a) stage", rules::ulysses},
          {Fault::thd_cross_boundary, "thd_cross_boundary",
           "the mask forgets the packed sequences: rows attend into earlier sequences", "2+ packed sequences",
           rules::packed},
          {Fault::thd_zigzag_stream, "thd_zigzag_stream",
           "the packed stream is zigzagged as one sequence, not each sequence on its own",
           "2+ packed sequences, zigzag layout", rules::packed_zigzag},
          {Fault::cu_seqlens_off_by_one, "cu_seqlens_off_by_one",
           "every boundary between packed sequences sits one row late in the mask", "2+ packed sequences",
           rules::packed},
          {Fault::dkv_scale, "dkv_scale",
           "the ring's dK/dV come home scaled by 1 + magnitude (--fault-magnitude, default 1e-3): a systematic error "
           "below bf16's rounding",
           "a ring of 2+ members", rules::ring, 1e-3},
          {Fault::window_skip_partial, "window_skip_partial",
           "the ring skips every step whose K/V block the sliding window only partly covers (as if outside it)",
           "a sliding window on a ring of 2+ members", rules::windowed_ring},
          {Fault::kv_replica_first_only, "kv_replica_first_only",
           "KV heads replicated for an a2a group larger than them: each head's dK/dV is its first copy's, not "
           "the sum over the copies",
           "a Ulysses (a2a) stage larger than the KV heads per TP rank", rules::kv_replicated},
          {Fault::padding_rows_attend, "padding_rows_attend",
           "the mask names padding rows as rows of their sequence (or of the padding after the last): they attend "
           "to its keys and take part in the LSE merge",
           "packed sequences (with padding: thd_padding, or tail_padding)", rules::packed_any},
      });
  return table;
}

}  // namespace sextant::cp
