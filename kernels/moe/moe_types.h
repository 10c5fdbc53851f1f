// Names the MoE layer's parts share with its callers (the step's GPT, the
// moe suite): which dispatcher moves the tokens, and what capacity drops.
#pragma once

#include <string>

namespace sextant::moe {

enum class DispatcherKind { alltoall, allgather };
std::string dispatcher_name(DispatcherKind kind);          // "alltoall", "allgather"
DispatcherKind parse_dispatcher(const std::string& name);  // throws UsageError

enum class DropPolicy { none, probability, position };
std::string drop_policy_name(DropPolicy policy);        // "none", "probability", "position"
DropPolicy parse_drop_policy(const std::string& name);  // throws UsageError

}  // namespace sextant::moe
