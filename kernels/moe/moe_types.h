// Names the MoE layer's parts share with its callers (the step's GPT, the
// moe suite): which dispatcher moves the tokens and how, and what capacity drops.
#pragma once

#include <string>

namespace sextant::moe {

enum class DispatcherKind { alltoall, allgather };
std::string dispatcher_name(DispatcherKind kind);          // "alltoall", "allgather"
DispatcherKind parse_dispatcher(const std::string& name);  // throws UsageError

// How the alltoall dispatcher moves rows over EP without ETP:
//   peer_memory  each row written once, straight into its expert's buffer on
//                the destination rank, where the EP ranks share memory (one
//                node, host rows); the collectives elsewhere
//   collectives  all_to_all_v of permuted rows (Megatron's path)
enum class Transport { peer_memory, collectives };
std::string transport_name(Transport transport);     // "peer_memory", "collectives"
Transport parse_transport(const std::string& name);  // throws UsageError

enum class DropPolicy { none, probability, position };
std::string drop_policy_name(DropPolicy policy);        // "none", "probability", "position"
DropPolicy parse_drop_policy(const std::string& name);  // throws UsageError

}  // namespace sextant::moe
