#include "kernels/ops/simd.h"

#include <algorithm>
#include <cstdlib>

namespace sextant::ops {

namespace {
int detected_lanes() {
#if defined(SEXTANT_SIMD_X86)
  if (__builtin_cpu_supports("x86-64-v4")) return 16;
  if (__builtin_cpu_supports("x86-64-v3")) return 8;
#endif
  return 4;
}
// SEXTANT_SIMD_LANES=4|8 caps the width (to compare levels, or to run the
// same code on machines of different generations).
int initial_cap() {
  const char* env = std::getenv("SEXTANT_SIMD_LANES");
  return env ? std::atoi(env) : 16;
}
int lane_cap = initial_cap();
}  // namespace

int simd_detail::host_lanes() {
  static const int detected = detected_lanes();
  return std::min(detected, lane_cap);
}

int limit_simd_lanes(int max_lanes) {
  const int previous = lane_cap;
  lane_cap = max_lanes;
  return previous;
}

int simd_lanes() { return simd_detail::host_lanes(); }

}  // namespace sextant::ops
