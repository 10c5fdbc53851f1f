#include "kernels/moe/moe_types.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::moe {

std::string dispatcher_name(DispatcherKind kind) { return kind == DispatcherKind::alltoall ? "alltoall" : "allgather"; }

DispatcherKind parse_dispatcher(const std::string& name) {
  for (DispatcherKind k : {DispatcherKind::alltoall, DispatcherKind::allgather})
    if (dispatcher_name(k) == name) return k;
  throw UsageError(cat("--set dispatcher='", name, "' must be alltoall or allgather"));
}

std::string transport_name(Transport transport) {
  return transport == Transport::peer_memory ? "peer_memory" : "collectives";
}

Transport parse_transport(const std::string& name) {
  for (Transport t : {Transport::peer_memory, Transport::collectives})
    if (transport_name(t) == name) return t;
  throw UsageError(cat("--set transport='", name, "' must be peer_memory or collectives"));
}

std::string drop_policy_name(DropPolicy policy) {
  switch (policy) {
    case DropPolicy::none: return "none";
    case DropPolicy::probability: return "probability";
    case DropPolicy::position: return "position";
  }
  return "?";
}

DropPolicy parse_drop_policy(const std::string& name) {
  for (DropPolicy p : {DropPolicy::none, DropPolicy::probability, DropPolicy::position})
    if (drop_policy_name(p) == name) return p;
  throw UsageError(cat("--set drop_policy='", name, "' must be none, probability or position"));
}

}  // namespace sextant::moe
