#include "kernels/attention/cp_variants.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::cp {

const std::vector<VariantInfo>& variants() {
  static const std::vector<VariantInfo> table = {
      {Variant::p2p, "p2p", "ring attention: K/V around the CP ring (isend/irecv under compute), dK/dV travel home",
       false, KvExchange::ring},
      {Variant::a2a, "a2a", "Ulysses: all-to-all heads for sequence, local attention, all-to-all back", true,
       std::nullopt},
      {Variant::allgather, "allgather", "all-gather K/V, local attention, reduce-scatter dK/dV (Llama 3)", false,
       KvExchange::allgather},
      {Variant::a2a_p2p, "a2a+p2p", "hierarchical: Ulysses inside a2a_size groups, a ring over the p2p_size groups",
       true, KvExchange::ring},
  };
  return table;
}

const VariantInfo& variant_info(Variant v) {
  for (const VariantInfo& info : variants())
    if (info.variant == v) return info;
  throw RuntimeError(cat("no CP variant ", static_cast<int>(v)));
}

std::vector<std::string> variant_names() {
  std::vector<std::string> out;
  for (const VariantInfo& info : variants()) out.push_back(info.name);
  return out;
}

Variant parse_variant(const std::string& name, const std::string& parameter) {
  for (const VariantInfo& info : variants())
    if (name == info.name) return info.variant;
  throw UsageError(cat(parameter, " '", name, "' must be one of ", join(variant_names(), ", ")));
}

FaultSite fault_site(const VariantInfo& v, int kv_size, bool causal, Layout layout, size_t sequences,
                     ops::Window window, bool kv_replicated) {
  return {v.a2a, v.kv, kv_size, causal, layout, sequences, window, kv_replicated};
}

}  // namespace sextant::cp
