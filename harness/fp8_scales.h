// FP8 conformance at the level of the scales (docs/CONFORMANCE.md, "FP8"):
// with a per-tensor recipe, every rank's decode scales equal the one-rank
// run's bit for bit, because each amax is reduced over the ranks that split
// the tensor before the cast.
#pragma once

#include <string>
#include <vector>

#include "harness/check.h"

namespace sextant {

// Decode scales by name ("fc1.weight", "layers.2.qkv.input").
struct Fp8Scales {
  std::vector<std::string> names;
  std::vector<float> values;
};

// Collective over the checker's group. all_names: every scale's name, in
// the same order on every rank; base: the one-rank run's values in that
// order (root only). Each rank compares the scales it holds (mine: names
// among all_names), failing with the first mismatch it finds and counting
// every one in the exact check "fp8_scales".
void check_fp8_scales(Checker& checker, const std::vector<std::string>& all_names, const Fp8Scales& mine,
                      const Fp8Scales& base);

}  // namespace sextant
