// The CP variants as one table: the attention suite runs one case per row,
// the 6D step picks its row with --set cp_comm, and the planner's step cost
// charges each row's stages. A variant is the composition of
// cp_attention.h's two stages:
//
//   variant     a2a group      kv group
//   p2p         -              CP, ring
//   allgather   -              CP, allgather
//   a2a         CP             -
//   a2a+p2p     A consecutive  cp/A, ring      (cp = a2a_size x p2p_size)
//
// A new variant made of these stages is one row here (and its case comes
// with it); a new stage is new kernel code in kv_exchange.h besides.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/attention/cp_faults.h"
#include "kernels/attention/cp_types.h"

namespace sextant::cp {

enum class Variant { p2p, a2a, allgather, a2a_p2p };

struct VariantInfo {
  Variant variant;
  const char* name;  // the attention case's name, the `variant` param, --set cp_comm
  const char* summary;
  bool a2a;                                             // has the Ulysses stage
  std::optional<KvExchange> kv;                         // the KV exchange over a kv group; none: local attention
  bool split() const { return a2a && kv.has_value(); }  // both: a2a_size x p2p_size
};

// Every variant, in listing order.
const std::vector<VariantInfo>& variants();
const VariantInfo& variant_info(Variant v);
// UsageError naming `parameter` and the variants for an unknown name.
Variant parse_variant(const std::string& name, const std::string& parameter);
std::vector<std::string> variant_names();

// The site its faults see (cp_faults.h) for one config of the variant.
FaultSite fault_site(const VariantInfo& v, int kv_size, bool causal, Layout layout, size_t sequences,
                     ops::Window window = {}, bool kv_replicated = false);

}  // namespace sextant::cp
