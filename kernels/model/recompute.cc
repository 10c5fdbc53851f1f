#include "kernels/model/recompute.h"

namespace sextant::model {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

std::vector<std::string> recompute_names() {
  std::vector<std::string> names;
  for (Recompute r : kRecomputeKinds) names.push_back(recompute_name(r));
  return names;
}

}  // namespace sextant::model
