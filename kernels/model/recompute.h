// Activation recomputation: what a layer keeps for its backward and what it
// computes again (the step runs it, the planner costs it).
//   none       every activation kept
//   selective  the attention core computed again (Korthikanti et al. 2022)
//   full       only each layer's input kept; its forward runs again in the
//              backward (Megatron's --recompute-granularity full)
#pragma once

#include <string>
#include <vector>

namespace sextant::model {

enum class Recompute { none, selective, full };
inline constexpr Recompute kRecomputeKinds[] = {Recompute::none, Recompute::selective, Recompute::full};
const char* recompute_name(Recompute r);  // "none", "selective", "full"
std::vector<std::string> recompute_names();

}  // namespace sextant::model
